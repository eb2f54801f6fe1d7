// The texts the tool-call families write around their calls (tool_calls.h
// shows each family's syntax). Several families share tags (<tool_call>,
// <function=), so they are named once here for all of them.
//
// Thread-safety: constants and a pure function.
#pragma once

#include <string_view>

namespace revis::node::toolcalls {

inline constexpr std::string_view kSpace = " \t\n\r";

inline constexpr std::string_view kToolCallOpen = "<tool_call>", kToolCallClose = "</tool_call>";
inline constexpr std::string_view kSeedToolCallOpen = "<seed:tool_call>", kSeedToolCallClose = "</seed:tool_call>";
inline constexpr std::string_view kPythonTag = "<|python_tag|>";
inline constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]",
                                  kMistralCallId = "[CALL_ID]";
inline constexpr std::string_view kFunctionOpen = "<function=", kFunctionClose = "</function>";
inline constexpr std::string_view kParameterOpen = "<parameter=", kParameterClose = "</parameter>";
inline constexpr std::string_view kArgKeyOpen = "<arg_key>", kArgKeyClose = "</arg_key>",
                                  kArgValueOpen = "<arg_value>", kArgValueClose = "</arg_value>";
inline constexpr std::string_view kKimiSectionBegin = "<|tool_calls_section_begin|>",
                                  kKimiCallBegin = "<|tool_call_begin|>",
                                  kKimiArgsBegin = "<|tool_call_argument_begin|>", kKimiCallEnd = "<|tool_call_end|>",
                                  kKimiSectionEnd = "<|tool_calls_section_end|>";
inline constexpr std::string_view kActionOpen = "<|START_ACTION|>", kActionClose = "<|END_ACTION|>";
inline constexpr std::string_view kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallBegin = "<｜tool▁call▁begin｜>",
                                  kDsSep = "<｜tool▁sep｜>", kDsCallEnd = "<｜tool▁call▁end｜>",
                                  kDsCallsEnd = "<｜tool▁calls▁end｜>";

// The generic format's JSON (tool_calls.h) as the grammar and the prompt
// write it: the answer's calls or words, and the calls' results as the
// prompt gives them back.
inline constexpr std::string_view kGenericCallsKey = "tool_calls", kGenericResponseKey = "response";
inline constexpr std::string_view kGenericCallsOpen = "{\"tool_calls\": [", kGenericResponseOpen = "{\"response\": ",
                                  kGenericResultsOpen = "{\"tool_results\": [", kGenericListClose = "]}";

inline bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

}  // namespace revis::node::toolcalls

// The prompt side of the generic tool-call format (tool_calls.h), for chat
// templates with no tool-call syntax of their own. The conversation is
// rewritten, before the template renders it, into messages every template
// takes:
//   - the tools (name, description, parameters schema) and the JSON answer
//     the request allows are described in a system message: appended to the
//     conversation's own, or a new one; a template that does not render a
//     system message gets them at the head of the first user message;
//   - an assistant's earlier calls become its content, in the answer's own
//     shape: {"tool_calls": [{"name": ..., "arguments": {...}}]};
//   - tool results become a user message,
//     {"tool_results": [{"name": ..., "content": "..."}]}: consecutive
//     results are one message, and a user message right after them joins
//     it, so that user and assistant turns still alternate (templates such
//     as Gemma's refuse anything else, others drop a `tool` role unseen).
// All of it is message text, so it stays literal in the prompt.
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"

namespace revis::node {

// The conversation to render for a template without tool-call syntax.
// `tools` (OpenAI's array, as the API validated it) may be null: then only
// earlier calls and results are rewritten. `system_role`: whether the
// template renders a system message.
std::vector<ChatMessage> generic_tool_conversation(std::span<const ChatMessage> messages,
                                                   const nlohmann::ordered_json* tools, const ToolRequest& request,
                                                   bool system_role);

// The section that describes `tools` and the answer `request` allows.
std::string generic_tools_section(const nlohmann::ordered_json& tools, const ToolRequest& request);

// An assistant's calls (OpenAI's tool_calls, arguments as objects) in the
// generic answer's shape and spacing, as the grammar writes them.
std::string generic_calls_text(const nlohmann::ordered_json& tool_calls);

}  // namespace revis::node

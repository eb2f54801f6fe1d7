// revis template --template FILE.jinja --input CASE.json: renders a chat
// template on one conversation and prints the prompt exactly as rendered (no
// newline added), to check a template against Python's jinja2 or to see what
// a model will be fed. A template that raises prints its message and exits 1.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "jinja/chat_template.h"

namespace revis::cli {
namespace {

struct TemplateArgs {
  std::string template_file, input_file;
};

int render_template(const TemplateArgs& args) {
  auto source = read_file(args.template_file);
  if (!source.ok()) return fail(source.status().message());
  auto input_text = read_file(args.input_file);
  if (!input_text.ok()) return fail(input_text.status().message());
  nlohmann::ordered_json input_json;
  try {
    input_json = nlohmann::ordered_json::parse(*input_text);
  } catch (const nlohmann::json::exception& e) {
    return fail(args.input_file + ": not JSON: " + e.what());
  }
  auto input = jinja::chat_input_from_json(input_json);
  if (!input.ok()) return fail(args.input_file + ": " + input.status().message());
  auto text = jinja::render_chat_template(*source, *input);
  if (!text.ok()) return fail(text.status().message());
  std::fwrite(text->data(), 1, text->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : fail("writing the rendered prompt failed");
}

}  // namespace

void register_template(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("template", "Render a chat template on a conversation (JSON) and print the prompt");
  auto args = std::make_shared<TemplateArgs>();
  cmd->add_option("--template", args->template_file, "Jinja chat template file")->required();
  cmd->add_option("--input", args->input_file,
                  "JSON object: messages, tools, add_generation_prompt, bos_token, eos_token, kwargs, now")
      ->required();
  cmd->callback([args, &exit_code] { exit_code = render_template(*args); });
}

}  // namespace revis::cli

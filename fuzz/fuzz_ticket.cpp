// libFuzzer target for the ticket parser (the first code to touch bytes a
// remote client sends). Any input must be refused with a known error code
// and a message, or accepted as a ticket or cancel whose fields obey the
// documented limits; and every event the node could send back about it must
// be valid JSON. The input is also run through catalogue admission, so
// arguments meet the template renderer too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "node/catalog.h"
#include "protocol/ticket.h"

namespace {

void require_json(const revis::node::TicketEvent& event) {
  if (!nlohmann::json::accept(event.text())) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace revis::node;
  static const Catalog catalog = Catalog::builtin();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_client_message(text, 4096);
  if (auto* rejected = std::get_if<RejectedMessage>(&parsed)) {
    if (rejected->error.message.empty()) __builtin_trap();
    if (!error_code_from_name(error_code_name(rejected->error.code))) __builtin_trap();
    if (rejected->ticket_id && !valid_ticket_id(*rejected->ticket_id)) __builtin_trap();
    require_json(error_event(rejected->ticket_id, rejected->error));
    return 0;
  }
  if (size > 4096) __builtin_trap();  // over the limit must never be accepted
  const ClientMessage& message = std::get<ClientMessage>(parsed);
  if (const auto* cancel = std::get_if<CancelRequest>(&message)) {
    if (!valid_ticket_id(cancel->id)) __builtin_trap();
    return 0;
  }
  if (const auto* resume = std::get_if<ResumeRequest>(&message)) {
    if (!valid_ticket_id(resume->id) || resume->attempt < 0 || resume->after_seq < -1) __builtin_trap();
    require_json(retry_event(resume->id, resume->attempt, "fuzz"));
    return 0;
  }
  if (std::holds_alternative<SubscribeRequest>(message)) return 0;
  const Ticket& ticket = std::get<Ticket>(message);
  if (!valid_ticket_id(ticket.id)) __builtin_trap();
  require_json(accepted_event(ticket.id, 0));
  if (const Task* task = catalog.find(ticket.task)) {
    auto prompt = catalog.render(*task, ticket.args);
    if (prompt.ok()) {
      require_json(token_event(ticket.id, 0, prompt->user));
    } else if (prompt.error().code != ErrorCode::kBadRequest && prompt.error().code != ErrorCode::kMissingArg) {
      __builtin_trap();  // rendering a validated catalogue fails only on the ticket's arguments
    }
  }
  return 0;
}

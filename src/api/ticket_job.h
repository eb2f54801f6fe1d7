// A ticket's job, read once where the ticket enters this node
// (Ticket::job): the HTTP APIs' requests at the door, already parsed
// there, and the tickets that arrive as messages (a WebSocket client's, a
// peer's forwarded OpenAI call, the broker's). The desks and the node then
// admit the job as often as they place the ticket without reading anything
// again (Node::admit).
//
// Thread-safety: free functions; the node is only read.
#pragma once

#include "api/embeddings_api.h"
#include "api/openai_api.h"
#include "node/node.h"
#include "protocol/ticket.h"

namespace revis::node {

// The job of a parsed OpenAI chat or completions request, and of an
// embeddings request; their tier and seed are the ticket's (OpenAiCall).
JobSpec openai_job(OpenAiRequest request);
JobSpec embeddings_job(EmbeddingRequest request);

// Sets `ticket.job` from the ticket itself: its OpenAI body parsed for its
// taskType, or its catalogue task rendered. An error is kept there for
// admit() to report when the desk admits the ticket, as it would any other.
void read_ticket_job(Ticket& ticket, const Node& node);

}  // namespace revis::node

// The node's network front: HTTP and WebSocket on one port (Boost.Beast).
//
//   GET  /v1/revis/stream      WebSocket, the ticket protocol (docs/protocol.md)
//   POST /v1/chat/completions  OpenAI chat, JSON or SSE
//   POST /v1/completions       OpenAI completions, JSON or SSE
//   POST /v1/messages/count_tokens  Anthropic's token count of a messages request
//   *    /api/...              Ollama's API, JSON or NDJSON (docs/api-ollama.md)
//   GET  /v1/models            the tiers, in OpenAI's list shape
//   GET  /health               200 ok, 503 while loading or stopping (no token needed)
//   GET  /v1/revis/status      the node's state as JSON
//   GET  /v1/revis/cluster     every node the fabric knows (TicketDesk::cluster_json)
//   GET  /metrics              Prometheus text
//   GET  /, /web/...           the dashboard's files (net/web_assets.h)
//
// With a token configured, everything but /health and the dashboard's
// files needs "Authorization: Bearer <token>" (a browser's WebSocket
// offers it as a subprotocol, net/request_guard.h). Before any of that, the server refuses
// broken HTTP framing (400/413/414/431), Hosts and browser Origins it does
// not serve (403, net/request_guard.h), and connections past its caps
// (net/connection_table.h); it logs one access line per request and
// ticket (net/access_log.h). docs/protocol.md, "Limits and browsers",
// lists each limit. All networking runs on one I/O thread; requests are
// parsed, converted and admitted on preparation threads
// (net/preparation_pool.h), so no request can hold it; the executor thread
// hands results to it by posting, so no connection state is shared between
// threads.
//
// The server is split by concept, each part Beast's (it compiles slowly)
// and net/'s alone; the rest of the node sees plain values: server.cpp
// accepts connections and runs serve(), server_state.h is what they share
// (and the shutdown), ws_session.h the ticket protocol's connections,
// http_session.h the HTTP ones (http_api_call.cpp: an API request run as
// tickets).
#pragma once

namespace revis::node {

class Node;
class TicketDesk;

// Listens on the configured address, starts the node, and serves until
// SIGINT/SIGTERM: then stops accepting, cancels queued jobs, lets the
// running one finish within the grace period, closes connections and
// returns 0. Returns 1 when it cannot listen or the startup model fails to
// load. Logs "listening on http://HOST:PORT" once the port is open (the real
// port when 0 was asked for).
// Tickets (WebSocket) go to `desk`, which places them (src/fabric).
int serve(Node& node, TicketDesk& desk);

}  // namespace revis::node

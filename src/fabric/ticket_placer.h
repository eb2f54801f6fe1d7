// The ticket placer: where each of the dispatcher's tickets runs. A ticket
// goes to the best idle node that serves its tier with the same catalogue,
// this node included (fabric/placement.h decides): first the one whose KV
// checkpoints hold the longest prefix of its prompt. If none is idle it
// waits in this node's executor queue, or, for a tier only peers serve, in
// the dispatcher's waiting line; when a peer reports idle, the oldest
// waiting ticket it can run moves there (offload). A ticket sent to a peer
// is marked `forwardedBy`, so that the peer runs it itself, except a ticket
// handed over at a shutdown, which the peer keeps as its own.
//
// It holds no tickets: the records are the book's, the waiting line the
// dispatcher's, and both are passed in.
//
// Thread-safety: the methods that move records REQUIRE the book's lock
// (book.mu), which the caller holds; they take the peer set's and the
// executor's locks after it. admissible() runs without it. The job hooks
// run on the executor's thread, without any lock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/peer_set.h"
#include "fabric/placement.h"
#include "fabric/ticket_record.h"
#include "node/node.h"
#include "node/ticket_book.h"

namespace revis::fabric {

class TicketPlacer {
 public:
  struct Hooks {
    // A ticket's placement changed (the cluster feed); under the book's lock.
    std::function<void(const TicketRecord& rec)> moved;
    // A job submitted here, for ticket `id` at `placement`, emitted text
    // (a streaming ticket) and ended.
    std::function<void(const std::string& id, uint64_t placement, std::string_view piece,
                       std::span<const node::LogprobEntry> logprobs, bool reasoning)>
        on_text;
    std::function<void(const std::string& id, uint64_t placement, node::Outcome<node::JobResult> outcome)> on_finish;
  };

  TicketPlacer(node::Node& node, PeerSet& peers, Hooks hooks);

  // Places `rec`: on a peer (kPeer), in this node's executor queue
  // (kLocal), or at the end of `waiting` (kWaiting; at its head when
  // `first`, a ticket placed again, to which the queue limit does not
  // apply). The position in the queue (0 on a peer), or why it cannot run.
  node::Outcome<int> place(node::TicketBook& book, std::deque<std::string>& waiting, TicketRecord& rec, bool first)
      REQUIRES(book.mu);
  // pinned: marked forwardedBy (runs there only while the link lasts);
  // otherwise a plain ticket that the peer keeps as its own (hand-off).
  void forward(node::TicketBook& book, TicketRecord& rec, const PeerView& peer, bool pinned) REQUIRES(book.mu);
  // Moves waiting tickets, then queued ones, to idle peers, best peer
  // first, until no peer is idle or nothing they can run is waiting.
  void offload(node::TicketBook& book, std::deque<std::string>& waiting) REQUIRES(book.mu);
  // Sends the tickets handed to `peer` at an earlier shutdown to it again,
  // now that its link is up, to relay their events.
  void relay_handed(node::TicketBook& book, const PeerView& peer) REQUIRES(book.mu);

  // Whether a new ticket may be accepted: its job (TicketRecord::job) is
  // admitted here, or its tier is one this node does not serve and a peer
  // with the same catalogue does (it will run there). Otherwise the error.
  std::optional<node::NodeError> admissible(const TicketRecord& rec) const;

 private:
  // The nodes that may run a ticket of `tier` as placement weighs them:
  // this node first when `include_self` (its entry in `nodes` is null),
  // then each of `peers`.
  std::vector<Candidate> candidates(const std::string& tier, const std::vector<PeerView>& peers,
                                    std::vector<const PeerView*>& nodes, bool include_self) const;
  // Sets each idle candidate's cached_tokens from the KV prefixes it
  // publishes for `tier`, from the prompt's digests (made when the ticket
  // arrived; here, under the lock, only when a node began publishing since).
  void weigh_cached_prefixes(TicketRecord& rec, const std::string& tier, const std::vector<const PeerView*>& nodes,
                             std::vector<Candidate>& cands) const;
  node::Outcome<int> submit_local(TicketRecord& rec, bool first) const;

  node::Node& node_;
  const node::NodeConfig& config_;
  PeerSet& peers_;
  const Hooks hooks_;
};

// The ticket as sent to a peer: pinned to this node's `catalog`, and marked
// `forwarded_by` so that the peer runs it itself (nullopt: a plain ticket).
std::string forwarded_message(node::Ticket ticket, const std::string& catalog, std::optional<std::string> forwarded_by);

}  // namespace revis::fabric

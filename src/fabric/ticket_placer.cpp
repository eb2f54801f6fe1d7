#include "fabric/ticket_placer.h"

namespace revis::fabric {
namespace {

using node::ErrorCode;
using node::NodeError;
using Where = TicketRecord::Where;

}  // namespace

std::string forwarded_message(node::Ticket ticket, const std::string& catalog, std::optional<std::string> forwarded_by) {
  ticket.catalog = catalog;
  ticket.forwarded_by = std::move(forwarded_by);
  return node::ticket_message(ticket);
}

TicketPlacer::TicketPlacer(node::Node& node, PeerSet& peers, Hooks hooks)
    : node_(node), config_(node.config()), peers_(peers), hooks_(std::move(hooks)) {}

std::vector<Candidate> TicketPlacer::candidates(const std::string& tier, const std::vector<PeerView>& peers,
                                                std::vector<const PeerView*>& nodes, bool include_self) const {
  std::vector<Candidate> out;
  nodes.clear();
  if (include_self) {
    const node::ExecutorSnapshot snap = node_.executor().snapshot();
    out.push_back({node_.serves_tier(tier), snap.queue_length > 0 ? 0 : snap.free_slots(),
                   peers_.local_state().has_loaded(tier), peers_.self_idle_since()});
    nodes.push_back(nullptr);
  }
  for (const PeerView& p : peers) {
    // Tickets already on their way there hold slots the peer has not
    // reported yet.
    out.push_back({p.takes_tickets(node_.catalog().digest()) && p.state.serves(tier),
                   p.state.queue_length > 0 ? 0 : std::max(0, p.state.slots_free - p.in_flight),
                   p.state.has_loaded(tier), p.idle_since});
    nodes.push_back(&p);
  }
  return out;
}

node::Outcome<int> TicketPlacer::place(node::TicketBook& book, std::deque<std::string>& waiting, TicketRecord& rec,
                                       bool first) {
  const std::string* tier = tier_of(node_.catalog(), rec.ticket);
  if (!tier) return NodeError{ErrorCode::kUnknownTask, "no task \"" + rec.ticket.task + "\" in this node's catalogue"};
  const std::vector<PeerView> views = peers_.views();
  std::vector<const PeerView*> nodes;
  std::vector<Candidate> cands = candidates(*tier, views, nodes, true);
  for (size_t i = 0; i < cands.size(); ++i) cands[i].capable = cands[i].capable && (rec.travels || !nodes[i]);
  weigh_cached_prefixes(rec, *tier, nodes, cands);
  if (auto best = choose_node(cands); best && nodes[*best]) {
    forward(book, rec, *nodes[*best], true);
    return 0;
  }
  if (node_.serves_tier(*tier)) return submit_local(rec, first);
  // Only peers serve this tier: the ticket waits here for one to be idle.
  if (!rec.travels)
    return NodeError{ErrorCode::kTooLong, "tier " + *tier + " runs only on peers, and this ticket is too large to send one (limit " +
                                              std::to_string(config_.max_message_bytes) + " bytes)"};
  if (!first && waiting.size() >= static_cast<size_t>(config_.queue_limit))
    return NodeError{ErrorCode::kQueueFull, "the queue for tier " + *tier + " is full (" +
                                                std::to_string(waiting.size()) + " tickets waiting for a peer)"};
  rec.where = Where::kWaiting;
  ++rec.placement;
  if (first) waiting.push_front(rec.ticket.id);
  else waiting.push_back(rec.ticket.id);
  hooks_.moved(rec);
  return static_cast<int>(waiting.size());
}

void TicketPlacer::weigh_cached_prefixes(TicketRecord& rec, const std::string& tier, const std::vector<const PeerView*>& nodes,
                                         std::vector<Candidate>& cands) const {
  const NodeState me = peers_.local_state();
  std::vector<const std::vector<std::string>*> published(cands.size(), nullptr);
  bool any = false;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].capable || cands[i].free_slots <= 0) continue;
    const auto& by_tier = nodes[i] ? nodes[i]->state.kv_prefixes : me.kv_prefixes;
    if (auto it = by_tier.find(tier); it != by_tier.end() && !it->second.empty()) {
      published[i] = &it->second;
      any = true;
    }
  }
  if (!any) return;
  if (!rec.prompt_digests)
    rec.prompt_digests = rec.job->ok() ? node_.prompt_prefix_digests(**rec.job) : std::vector<std::string>();
  for (size_t i = 0; i < cands.size(); ++i)
    if (published[i]) cands[i].cached_tokens = cached_prefix_tokens(*rec.prompt_digests, node::kPrefixDigestBlock, *published[i]);
}

std::optional<NodeError> TicketPlacer::admissible(const TicketRecord& rec) const {
  const node::Outcome<node::JobSpec>& job = *rec.job;
  if (job.ok()) return std::nullopt;
  const node::Task* task = node_.catalog().find(rec.ticket.task);
  if (job.error().code != ErrorCode::kModelUnavailable || !task || node_.serves_tier(task->tier)) return job.error();
  auto prompt = node_.catalog().render(*task, rec.ticket.args);
  if (!prompt.ok()) return prompt.error();
  for (const PeerView& p : peers_.views())
    if (p.known && !p.is_self && p.state.catalog == node_.catalog().digest() && p.state.serves(task->tier)) return std::nullopt;
  return NodeError{ErrorCode::kModelUnavailable,
                   "task " + task->name + " runs on tier " + task->tier + ", which neither this node nor a reachable peer serves"};
}

node::Outcome<int> TicketPlacer::submit_local(TicketRecord& rec, bool first) const {
  if (!rec.job->ok()) return rec.job->error();
  const std::string id = rec.ticket.id;
  const uint64_t placement = ++rec.placement;
  node::JobCallbacks callbacks;
  if (rec.ticket.streaming) {
    callbacks.on_text = [on_text = hooks_.on_text, id, placement](std::string_view piece,
                                                                 std::span<const node::LogprobEntry> logprobs) {
      on_text(id, placement, piece, logprobs, false);
    };
    callbacks.on_reasoning = [on_text = hooks_.on_text, id, placement](std::string_view piece) {
      on_text(id, placement, piece, {}, true);
    };
  }
  callbacks.on_finish = [on_finish = hooks_.on_finish, id, placement](node::Outcome<node::JobResult> outcome) {
    on_finish(id, placement, std::move(outcome));
  };
  // A copy: a later placement here runs the same job.
  auto admission = node_.executor().submit(**rec.job, std::move(callbacks), first);
  if (!admission.ok()) return admission.error();
  rec.where = Where::kLocal;
  rec.job_id = admission->job_id;
  rec.peer.clear();
  hooks_.moved(rec);
  return admission->position;
}

void TicketPlacer::forward(node::TicketBook& book, TicketRecord& rec, const PeerView& peer, bool pinned) {
  rec.where = Where::kPeer;
  ++rec.placement;
  rec.peer = peer.key;
  rec.session = peer.session;
  rec.job_id = 0;
  rec.peer_has_it = false;
  peers_.send_ticket(peer.key, peer.session,
                     forwarded_message(rec.ticket, node_.catalog().digest(), pinned ? std::optional(config_.name) : std::nullopt));
  hooks_.moved(rec);
}

void TicketPlacer::offload(node::TicketBook& book, std::deque<std::string>& waiting) {
  std::vector<const PeerView*> nodes;
  std::vector<PeerView> views = peers_.views();
  for (auto it = waiting.begin(); it != waiting.end();) {
    TicketRecord& rec = *find_record(book, *it);
    const std::string* tier = tier_of(node_.catalog(), rec.ticket);
    std::optional<size_t> best;
    if (tier) {
      std::vector<Candidate> cands = candidates(*tier, views, nodes, false);
      weigh_cached_prefixes(rec, *tier, nodes, cands);
      best = choose_node(cands);
    }
    if (!best) {
      ++it;
      continue;
    }
    it = waiting.erase(it);
    forward(book, rec, *nodes[*best], true);
    views = peers_.views();  // the ticket counts in flight there now
  }
  while (true) {
    // Any tier: a peer is a candidate when idle; the job taken must suit it.
    const std::vector<PeerView> views = peers_.views();
    std::vector<Candidate> cands = candidates("", views, nodes, false);
    for (size_t i = 0; i < cands.size(); ++i) cands[i].capable = nodes[i]->takes_tickets(node_.catalog().digest());
    auto best = choose_node(cands);
    if (!best) return;
    const PeerView& peer = *nodes[*best];
    auto job = node_.executor().take_queued([&](const node::JobSpec& spec) REQUIRES(book.mu) {  // called under this lock
      if (!peer.state.serves(spec.tier)) return false;
      const TicketRecord* rec = find_record(book, spec.label);
      return rec && rec->where == Where::kLocal && rec->travels;
    });
    if (!job) return;
    forward(book, *find_record(book, job->spec.label), peer, true);
  }
}

void TicketPlacer::relay_handed(node::TicketBook& book, const PeerView& peer) {
  for (const auto& [id, entry] : book.entries()) {
    auto& rec = static_cast<TicketRecord&>(*entry);
    if (rec.where == Where::kHandedOff && rec.handed_to == peer.key) forward(book, rec, peer, false);
  }
}

}  // namespace revis::fabric

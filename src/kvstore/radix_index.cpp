#include "kvstore/radix_index.h"

#include <algorithm>

namespace revis::kvstore {
namespace {

size_t shared_length(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

RadixIndex::RadixIndex() : root_(std::make_unique<Node>()) {}
RadixIndex::~RadixIndex() = default;

void RadixIndex::insert(std::span<const int32_t> key, uint64_t id) {
  Node* node = root_.get();
  size_t at = 0;
  while (at < key.size()) {
    auto it = node->children.find(key[at]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(key.begin() + at, key.end());
      leaf->id = id;
      node->children.emplace(key[at], std::move(leaf));
      ++size_;
      return;
    }
    Node* child = it->second.get();
    const size_t shared = shared_length(child->edge, key.subspan(at));
    if (shared < child->edge.size()) {
      // Split the edge: a new node for the shared run, the old child below it.
      auto middle = std::make_unique<Node>();
      middle->edge.assign(child->edge.begin(), child->edge.begin() + shared);
      std::unique_ptr<Node> old = std::move(it->second);
      old->edge.erase(old->edge.begin(), old->edge.begin() + shared);
      const int32_t old_first = old->edge.front();
      middle->children.emplace(old_first, std::move(old));
      it->second = std::move(middle);
      child = it->second.get();
    }
    node = child;
    at += shared;
  }
  if (!node->id) ++size_;
  node->id = id;
}

bool RadixIndex::erase(std::span<const int32_t> key) {
  // The path from the root, to prune and merge on the way back.
  std::vector<Node*> path{root_.get()};
  size_t at = 0;
  while (at < key.size()) {
    auto it = path.back()->children.find(key[at]);
    if (it == path.back()->children.end()) return false;
    Node* child = it->second.get();
    if (shared_length(child->edge, key.subspan(at)) < child->edge.size()) return false;
    at += child->edge.size();
    path.push_back(child);
  }
  Node* node = path.back();
  if (node == root_.get() || !node->id) return false;
  node->id.reset();
  --size_;
  // A node without an id keeps a reason to exist only with two children or
  // more: remove empty leaves, merge single children into their parent.
  for (size_t i = path.size() - 1; i > 0; --i) {
    Node* n = path[i];
    Node* parent = path[i - 1];
    if (n->id) break;
    if (n->children.empty()) {
      parent->children.erase(n->edge.front());
      continue;
    }
    if (n->children.size() == 1) {
      std::unique_ptr<Node> only = std::move(n->children.begin()->second);
      only->edge.insert(only->edge.begin(), n->edge.begin(), n->edge.end());
      parent->children[only->edge.front()] = std::move(only);  // replaces (and frees) n
    }
    break;
  }
  return true;
}

std::optional<RadixIndex::Match> RadixIndex::longest_common(std::span<const int32_t> query) const {
  // Walk down while the query matches whole edges. `below` ends where the
  // query diverges (or ends): every key in its subtree shares exactly `at`
  // tokens with the query. below_length is the key length at `below`.
  const Node* below = root_.get();
  size_t at = 0, below_length = 0;
  while (at < query.size()) {
    auto it = below->children.find(query[at]);
    if (it == below->children.end()) break;
    const Node* child = it->second.get();
    const size_t shared = shared_length(child->edge, query.subspan(at));
    at += shared;
    below = child;
    below_length += child->edge.size();
    if (shared < child->edge.size()) break;
  }
  if (at == 0) return std::nullopt;
  if (below_length == at && below->id) return Match{*below->id, static_cast<int>(at), static_cast<int>(at)};
  std::optional<Match> best;
  std::vector<std::pair<const Node*, size_t>> stack{{below, below_length}};
  while (!stack.empty()) {
    const auto [n, length] = stack.back();
    stack.pop_back();
    if (n->id && (!best || static_cast<int>(length) < best->key_length))
      best = Match{*n->id, static_cast<int>(at), static_cast<int>(length)};
    for (const auto& [first, child] : n->children) stack.push_back({child.get(), length + child->edge.size()});
  }
  return best;
}

std::vector<uint64_t> RadixIndex::prefixes_of(std::span<const int32_t> query) const {
  std::vector<uint64_t> ids;
  const Node* node = root_.get();
  size_t at = 0;
  while (at < query.size()) {
    auto it = node->children.find(query[at]);
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    if (shared_length(child->edge, query.subspan(at)) < child->edge.size()) break;
    at += child->edge.size();
    node = child;
    if (node->id) ids.push_back(*node->id);
  }
  return ids;
}

}  // namespace revis::kvstore

// RadixIndex: checkpoints keyed by their token ids in a radix tree (a trie
// whose edges carry runs of tokens), so that finding the checkpoint that
// shares the longest prefix with a prompt costs the prompt's length plus the
// subtree where it diverges, not a scan over every checkpoint.
//
// Keys are token sequences; each key maps to one id (the store's entry).
// Thread-safety: none; the store serialises access.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace revis::kvstore {

class RadixIndex {
 public:
  RadixIndex();
  ~RadixIndex();

  // Adds or replaces the id of `key` (non-empty).
  void insert(std::span<const int32_t> key, uint64_t id);
  // Removes `key`; false when it was not there.
  bool erase(std::span<const int32_t> key);

  struct Match {
    uint64_t id = 0;
    int common = 0;  // tokens the key shares with the query
    int key_length = 0;
  };
  // The key sharing the longest prefix with `query`. Among keys sharing the
  // same longest prefix: the query itself if present, else the shortest
  // (the cheapest to read). Nothing when no key shares even one token.
  std::optional<Match> longest_common(std::span<const int32_t> query) const;
  // Ids of the keys that are prefixes of `query` (query itself included),
  // shortest first.
  std::vector<uint64_t> prefixes_of(std::span<const int32_t> query) const;
  size_t size() const { return size_; }

 private:
  struct Node {
    std::vector<int32_t> edge;  // tokens from the parent to this node
    std::map<int32_t, std::unique_ptr<Node>> children;  // keyed by their edge's first token
    std::optional<uint64_t> id;
  };
  std::unique_ptr<Node> root_;
  size_t size_ = 0;
};

}  // namespace revis::kvstore

#include "net/connection_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace revis::node {
namespace {

// A connection that records its eviction and gives its slot back.
struct FakeConnection : ConnectionTable::Idle {
  ConnectionTable::Slot slot;
  bool evicted = false;
  void evict() override {
    evicted = true;
    slot.release();
  }
};

std::shared_ptr<FakeConnection> connect(ConnectionTable& table, const std::string& address, bool idle) {
  auto slot = table.admit(address);
  if (!slot) return nullptr;
  auto c = std::make_shared<FakeConnection>();
  c->slot = std::move(*slot);
  if (idle) table.set_idle(c->slot, c);
  return c;
}

TEST(ConnectionTable, NewConnectionsEvictTheLongestIdleOneAtTheCap) {
  ConnectionTable table(3, 10);
  auto a = connect(table, "10.0.0.1", true);
  auto b = connect(table, "10.0.0.2", true);
  auto c = connect(table, "10.0.0.3", false);
  ASSERT_TRUE(a && b && c);
  auto d = connect(table, "10.0.0.4", false);
  ASSERT_TRUE(d);
  EXPECT_TRUE(a->evicted);
  EXPECT_FALSE(b->evicted);
  EXPECT_EQ(table.size(), 3u);
  table.set_busy(b->slot);  // b reads a request now: never evicted
  EXPECT_EQ(connect(table, "10.0.0.5", false), nullptr) << "only busy connections: refused";
  d.reset();  // a connection that ends frees its place
  EXPECT_EQ(table.size(), 2u);
  EXPECT_NE(connect(table, "10.0.0.5", false), nullptr);
}

TEST(ConnectionTable, AnAddressAtItsCapEvictsItsOwnIdleConnectionsFirst) {
  ConnectionTable table(100, 2);
  auto other = connect(table, "10.0.0.9", true);
  auto a1 = connect(table, "10.0.0.1", true);
  auto a2 = connect(table, "10.0.0.1", false);
  auto a3 = connect(table, "10.0.0.1", true);
  ASSERT_TRUE(a3);
  EXPECT_TRUE(a1->evicted);
  EXPECT_FALSE(other->evicted) << "another address's idle connection stays";
  table.set_busy(a3->slot);
  EXPECT_EQ(connect(table, "10.0.0.1", false), nullptr) << "the address's cap is full of busy connections";
  EXPECT_FALSE(other->evicted);
  EXPECT_NE(connect(table, "10.0.0.2", false), nullptr) << "other addresses still get in";
}

TEST(ConnectionTable, EvictOneFreesADescriptorAndSlotsReleaseOnce) {
  ConnectionTable table(10, 10);
  auto a = connect(table, "10.0.0.1", true);
  EXPECT_TRUE(table.evict_one());
  EXPECT_TRUE(a->evicted);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.evict_one());
  a->slot.release();
  EXPECT_EQ(table.size(), 0u);
  ConnectionTable::Slot moved = std::move(*table.admit("10.0.0.2"));
  EXPECT_EQ(table.size(), 1u);
  ConnectionTable::Slot target = std::move(moved);
  moved.release();
  EXPECT_EQ(table.size(), 1u);
  target.release();
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace revis::node

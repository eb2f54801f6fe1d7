// The shaders that reduce across a workgroup besides matmul (rms_norm's
// sum of squares, attention's block maximum and sum), in both builds: with
// subgroup arithmetic and through shared memory only. Each against the
// CPU's reference in double, and a row's result the same bits alone and
// among others. And which build a device runs: the subgroup one where it
// has subgroup arithmetic (lavapipe does, so CI runs both), unless
// DeviceOptions turns it off.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu_test_device.h"
#include "quant/quant.h"

namespace revis {
namespace {

TEST(SubgroupBuild, RunsWhereTheDeviceHasSubgroupArithmeticUnlessTurnedOff) {
  REVIS_REQUIRE_GPU();
  auto on = gpu::Device::open(0);
  ASSERT_TRUE(on.ok()) << on.status().message();
  const gpu::DeviceInfo& info = (*on)->info();
  EXPECT_EQ((*on)->uses_subgroups(), info.subgroup_arithmetic);
  // CI's device: without this, the subgroup cases below would quietly run
  // the shared-memory build twice.
  if (info.name.starts_with("llvmpipe")) EXPECT_TRUE(info.subgroup_arithmetic) << info.name;
  auto off = gpu::Device::open(0, {.subgroups = false});
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_FALSE((*off)->uses_subgroups());
}

class ReductionShader : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    REVIS_REQUIRE_GPU();
    auto d = gpu::Device::open(0, {.subgroups = GetParam()});
    ASSERT_TRUE(d.ok()) << d.status().message();
    device_ = std::move(*d);
  }

  gpu::Buffer upload(const void* data, size_t bytes, const char* what) {
    auto b = device_->allocate(bytes, what);
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok()) return {};
    EXPECT_TRUE(device_->write(*b, 0, data, bytes).ok());
    return std::move(*b);
  }

  std::vector<float> download(const gpu::Buffer& b, size_t count) {
    std::vector<float> out(count);
    EXPECT_TRUE(device_->read(b, 0, out.data(), count * 4).ok());
    return out;
  }

  // rms_norm over `rows` rows of `width` random values (seeded), and the
  // CPU's reference in `reference`.
  std::vector<float> rms_norm(int rows, int width, uint32_t seed, std::vector<double>& reference) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(rows) * width), weight(width);
    for (float& v : weight) v = normal(rng);  // first: the rows after them vary in number
    for (float& v : x) v = normal(rng);
    const float eps = 1e-6f;
    reference.assign(x.size(), 0.0);
    for (int r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (int i = 0; i < width; ++i) sum += double(x[r * width + i]) * x[r * width + i];
      const double scale = 1.0 / std::sqrt(sum / width + eps);
      for (int i = 0; i < width; ++i) reference[r * width + i] = x[r * width + i] * scale * weight[i];
    }
    gpu::Buffer xb = upload(x.data(), x.size() * 4, "x");
    gpu::Buffer wb = upload(weight.data(), weight.size() * 4, "weight");
    auto ob = device_->allocate(x.size() * 4, "out");
    EXPECT_TRUE(ob.ok());
    struct {
      uint32_t width, stride, x_offset, o_offset;
      float eps;
    } p{static_cast<uint32_t>(width), static_cast<uint32_t>(width), 0, 0, eps};
    device_->begin();
    device_->dispatch("rms_norm", {&xb, &wb, &*ob}, &p, sizeof p, rows);
    const Status s = device_->run();
    EXPECT_TRUE(s.ok()) << s.message();
    return download(*ob, x.size());
  }

  // Causal attention of `tokens` rows after `n_past` cached positions,
  // random queries, keys and values (seeded), 4 query heads on 2 KV heads
  // of 64 dimensions; the CPU's reference (from the caches' halves) in
  // `reference`.
  std::vector<float> attention(int n_past, int tokens, uint32_t seed, std::vector<double>& reference) {
    const int n_head = 4, n_head_kv = 2, hd = 64, n_ctx = n_past + tokens;
    const float scale = 1.0f / std::sqrt(float(hd));
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q(static_cast<size_t>(tokens) * n_head * hd);
    for (float& v : q) v = normal(rng);
    // Per KV head, n_ctx rows of hd halves; values as the CPU reads them back.
    std::vector<uint16_t> keys(static_cast<size_t>(n_head_kv) * n_ctx * hd), values(keys.size());
    for (uint16_t& h : keys) h = fp32_to_fp16(normal(rng));
    for (uint16_t& h : values) h = fp32_to_fp16(normal(rng));
    reference.assign(q.size(), 0.0);
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < n_head; ++h) {
        const size_t head = static_cast<size_t>(h / (n_head / n_head_kv)) * n_ctx * hd;
        const int seen = n_past + t + 1;
        std::vector<double> score(seen);
        double max_score = -INFINITY, sum = 0.0;
        for (int pos = 0; pos < seen; ++pos) {
          double s = 0.0;
          for (int i = 0; i < hd; ++i) s += double(q[(t * n_head + h) * hd + i]) * fp16_to_fp32(keys[head + pos * hd + i]);
          score[pos] = s * scale;
          max_score = std::max(max_score, score[pos]);
        }
        for (double& s : score) sum += (s = std::exp(s - max_score));
        for (int pos = 0; pos < seen; ++pos)
          for (int i = 0; i < hd; ++i)
            reference[(t * n_head + h) * hd + i] += score[pos] / sum * fp16_to_fp32(values[head + pos * hd + i]);
      }
    gpu::Buffer qb = upload(q.data(), q.size() * 4, "queries");
    gpu::Buffer kb = upload(keys.data(), keys.size() * 2, "keys");
    gpu::Buffer vb = upload(values.data(), values.size() * 2, "values");
    auto ob = device_->allocate(q.size() * 4, "out");
    EXPECT_TRUE(ob.ok());
    struct {
      uint32_t row0, n_past, n_head, n_head_kv, head_dim, n_ctx, value_dim;
      float scale;
    } p{0, static_cast<uint32_t>(n_past), n_head, n_head_kv, hd, static_cast<uint32_t>(n_ctx), hd, scale};
    device_->begin();
    device_->dispatch("attention", {&qb, &kb, &vb, &*ob}, &p, sizeof p, tokens, n_head);
    const Status s = device_->run();
    EXPECT_TRUE(s.ok()) << s.message();
    return download(*ob, q.size());
  }

  std::unique_ptr<gpu::Device> device_;
};

TEST_P(ReductionShader, RmsNormMatchesTheCpuReference) {
  // Fewer values than threads, not a multiple of them, and many per thread.
  for (const int width : {40, 200, 2048}) {
    std::vector<double> reference;
    const std::vector<float> out = rms_norm(3, width, width, reference);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], reference[i], 1e-5 * (1 + std::fabs(reference[i]))) << "width " << width << " value " << i;
  }
}

TEST_P(ReductionShader, RmsNormOfARowIsTheSameBitsAloneAndAmongOthers) {
  std::vector<double> unused;
  // The same seed gives the same weights and first row.
  const std::vector<float> among = rms_norm(9, 200, 5, unused);
  const std::vector<float> alone = rms_norm(1, 200, 5, unused);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(alone[i], among[i]) << "value " << i;
}

TEST_P(ReductionShader, AttentionMatchesTheCpuReference) {
  // One block of 64 positions, and three (the running maximum and sum
  // rescaled as each block comes).
  for (const int n_past : {0, 150}) {
    std::vector<double> reference;
    const std::vector<float> out = attention(n_past, 3, n_past + 1, reference);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], reference[i], 1e-4) << "n_past " << n_past << " value " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(BothBuilds, ReductionShader, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Subgroups" : "SharedMemory"; });

}  // namespace
}  // namespace revis

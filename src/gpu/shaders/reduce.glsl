// workgroup_reduce: sums (or maxima) over the 64 threads of a workgroup,
// REDUCE_WIDTH values per thread at once (the includer defines it), every
// thread receiving the results. Every thread calls it together, in uniform
// control flow: it holds barriers. The order of the operations depends only
// on which thread held each value, never on the values or on other
// workgroups, so a token's result is the same bits in any batch (the
// device side of model.h's batch invariance).
//
// Built with SUBGROUPS (a second SPIR-V of the shader, chosen at pipeline
// creation where the device has subgroup arithmetic in compute shaders):
// each subgroup reduces its values in registers (subgroupAdd, subgroupMax),
// then every thread folds the subgroups' results from shared memory in
// subgroup order: one barrier instead of one per level. Without it, a tree
// through shared memory, halving the stride from 32 with a barrier per
// level. The two orders differ, so the two builds differ in the last bits;
// each is fixed for its device.
#extension GL_EXT_control_flow_attributes : enable
#ifdef SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

const uint kReduceThreads = 64u;
// Per value: one slot per thread (the tree), of which the subgroup build
// uses one per subgroup.
shared float reduce_scratch[REDUCE_WIDTH * kReduceThreads];

float reduce_pair(float a, float b, bool take_max) { return take_max ? max(a, b) : a + b; }

void workgroup_reduce(inout float v[REDUCE_WIDTH], bool take_max) {
#ifdef SUBGROUPS
  [[unroll]] for (uint j = 0u; j < REDUCE_WIDTH; ++j) {
    const float s = take_max ? subgroupMax(v[j]) : subgroupAdd(v[j]);
    if (subgroupElect()) reduce_scratch[j * kReduceThreads + gl_SubgroupID] = s;
  }
  barrier();
  [[unroll]] for (uint j = 0u; j < REDUCE_WIDTH; ++j) {
    float r = reduce_scratch[j * kReduceThreads];
    for (uint i = 1u; i < gl_NumSubgroups; ++i) r = reduce_pair(r, reduce_scratch[j * kReduceThreads + i], take_max);
    v[j] = r;
  }
#else
  const uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint j = 0u; j < REDUCE_WIDTH; ++j) reduce_scratch[j * kReduceThreads + tid] = v[j];
  barrier();
  for (uint stride = kReduceThreads / 2u; stride > 0u; stride >>= 1) {
    if (tid < stride)
      [[unroll]] for (uint j = 0u; j < REDUCE_WIDTH; ++j) {
        const uint at = j * kReduceThreads + tid;
        reduce_scratch[at] = reduce_pair(reduce_scratch[at], reduce_scratch[at + stride], take_max);
      }
    barrier();
  }
  [[unroll]] for (uint j = 0u; j < REDUCE_WIDTH; ++j) v[j] = reduce_scratch[j * kReduceThreads];
#endif
  barrier();  // every thread has read the scratch: the next call may write it
}

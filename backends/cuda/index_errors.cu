// Bad indices raised without a synchronisation per call (index_errors.h).
#include "strata/backends/cuda/index_errors.h"
#include "strata/ops/table/xent_labels.h"

namespace strata::backends::cuda {

namespace {

// What the device hands the host: written by note_kernel, `set` last; the host reads `set`
// first and clears it once raised.
struct IndexRecord {
  int64_t op, pos, value, extent, ignore_index;
  int set;
};

__global__ void note_kernel(unsigned long long* word, int op, const void* index, bool i32, int64_t stride,
                            int64_t extent, int64_t ignore_index, volatile IndexRecord* rec) {
  const unsigned long long pos = *word;
  if (pos == kNoBadIndex) return;
  *word = kNoBadIndex;
  if (rec->set) return;  // an earlier one, not yet raised, keeps its place
  const int64_t at = static_cast<int64_t>(pos) * stride;
  rec->op = op;
  rec->pos = static_cast<int64_t>(pos);
  rec->value = i32 ? static_cast<const int32_t*>(index)[at] : static_cast<const int64_t*>(index)[at];
  rec->extent = extent;
  rec->ignore_index = ignore_index;
  __threadfence_system();
  rec->set = 1;
}

// One per context, kept in its plan cache (plans live as long as the context).
struct IndexErrors final : Plan {
  explicit IndexErrors(Context& ctx) {
    STRATA_CUDA_CHECK(cudaMalloc(&word, sizeof(unsigned long long)));
    STRATA_CUDA_CHECK(cudaMemsetAsync(word, 0xff, sizeof(unsigned long long), ctx.stream));
    void* host = nullptr;
    STRATA_CUDA_CHECK(cudaHostAlloc(&host, sizeof(IndexRecord), cudaHostAllocMapped));
    rec = static_cast<volatile IndexRecord*>(host);
    rec->set = 0;
    void* dev = nullptr;
    STRATA_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    rec_dev = static_cast<volatile IndexRecord*>(dev);
  }
  ~IndexErrors() override {
    (void)cudaFree(word);
    (void)cudaFreeHost(const_cast<IndexRecord*>(rec));
  }
  unsigned long long* word = nullptr;
  volatile IndexRecord* rec = nullptr;
  volatile IndexRecord* rec_dev = nullptr;
};

IndexErrors& index_errors(Context& ctx) {
  PlanKey key;
  key.add(9101);
  return ctx.plan<IndexErrors>(key, [&] { return std::make_unique<IndexErrors>(ctx); });
}

}  // namespace

unsigned long long* bad_index_word(Context& ctx) { return index_errors(ctx).word; }

void note_bad_index(Context& ctx, IndexCheck op, const ops::TensorView& index, int64_t extent, int64_t ignore_index) {
  IndexErrors& e = index_errors(ctx);
  note_kernel<<<1, 1, 0, ctx.stream>>>(e.word, static_cast<int>(op), index.data, index.dtype == DType::i32,
                                       index.strides[0], extent, ignore_index, e.rec_dev);
  STRATA_CUDA_CHECK_LAUNCH("the bad-index check");
}

void raise_bad_index(Context& ctx) {
  volatile IndexRecord* r = index_errors(ctx).rec;
  if (!r->set) return;
  const auto op = static_cast<IndexCheck>(r->op);
  const int64_t pos = r->pos, value = r->value, extent = r->extent, ignore_index = r->ignore_index;
  r->set = 0;
  if (op == IndexCheck::xent_label) ops::fail_xent_label("softmax_xent_fwd", pos, value, extent, ignore_index);
  STRATA_FAIL(op == IndexCheck::index_select ? "index_select" : "index_add", ": argument 'index': index[", pos,
              "] = ", value, " is out of range for a dim of size ", extent);
}

}  // namespace strata::backends::cuda

#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include "distributed/collective_check.h"

#include <algorithm>
#include <sstream>

namespace neuron_sim::distributed {
namespace {

// Slot layout of one record.
enum SignatureSlot : int {
  kOpHash = 0,     // hash of the collective's name
  kRoot,
  kReduceOp,
  kCount,          // number of tensors
  kTensorsHash,    // hash of every tensor's dtype and shape
  kLocalError,     // 1 when this rank's arguments were rejected locally
  kFirstTensor,    // dtype, ndim, dims of the first tensors, while they fit
};

// FNV-1a over the collective's name and the tensors' integers: no string is
// built for a collective whose ranks agree (a message only when they do not).
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL, kFnvPrime = 0x100000001b3ULL;

uint64_t mix(uint64_t h, uint64_t word) {
  for (int i = 0; i < 8; ++i, word >>= 8) h = (h ^ (word & 0xff)) * kFnvPrime;
  return h;
}

int64_t positive(uint64_t h) { return static_cast<int64_t>(h & 0x7fffffffffffffffULL); }

int64_t hashName(const char* s) {
  uint64_t h = kFnvBasis;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * kFnvPrime;
  return positive(h);
}

// Every tensor's dtype and shape, including those the record has no room to spell out.
int64_t hashTensors(const std::vector<at::Tensor>& ts) {
  uint64_t h = kFnvBasis;
  for (const auto& t : ts) {
    h = mix(mix(h, static_cast<uint64_t>(t.scalar_type())), static_cast<uint64_t>(t.dim()));
    for (int64_t d : t.sizes()) h = mix(h, static_cast<uint64_t>(d));
  }
  return positive(h);
}

}  // namespace

std::string dtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kChar: return "int8";
    case c10::kShort: return "int16";
    case c10::kInt: return "int32";
    case c10::kLong: return "int64";
    case c10::kByte: return "uint8";
    case c10::kBool: return "bool";
    case c10::kComplexFloat: return "complex64";
    case c10::kComplexDouble: return "complex128";
    case c10::kFloat8_e5m2: return "float8_e5m2";
    case c10::kFloat8_e4m3fn: return "float8_e4m3fn";
    default: return c10::toString(t);
  }
}

namespace {

std::string describeList(const std::vector<at::Tensor>& ts) {
  std::ostringstream os;
  for (size_t i = 0; i < ts.size(); ++i) os << (i ? ", " : "") << describeTensor(ts[i]);
  return os.str();
}

// Decodes the tensors a record could hold ("float32[4, 3], int64[2]"); the
// list ends with "..." when the record had no room for all of them.
std::string decodeTensors(const int64_t* rec) {
  std::ostringstream os;
  int64_t count = rec[kCount];
  int slot = kFirstTensor;
  for (int64_t i = 0; i < count; ++i) {
    if (slot + 2 > kSignatureSlots || slot + 2 + rec[slot + 1] > kSignatureSlots) {
      os << (i ? ", " : "") << "...";
      break;
    }
    auto dtype = static_cast<c10::ScalarType>(rec[slot]);
    int64_t ndim = rec[slot + 1];
    os << (i ? ", " : "") << dtypeName(dtype) << "[";
    for (int64_t d = 0; d < ndim; ++d) os << (d ? ", " : "") << rec[slot + 2 + d];
    os << "]";
    slot += 2 + static_cast<int>(ndim);
  }
  return os.str();
}

}  // namespace

std::string describeTensor(const at::Tensor& t) {
  std::ostringstream os;
  os << dtypeName(t.scalar_type()) << "[";
  for (int64_t d = 0; d < t.dim(); ++d) os << (d ? ", " : "") << t.size(d);
  os << "]";
  return os.str();
}

std::vector<int64_t> encodeSignature(const Signature& sig) {
  std::vector<int64_t> rec(kSignatureSlots, 0);
  rec[kOpHash] = hashName(sig.op);
  rec[kRoot] = sig.root;
  rec[kReduceOp] = sig.reduce_op;
  rec[kCount] = static_cast<int64_t>(sig.tensors.size());
  rec[kTensorsHash] = hashTensors(sig.tensors);
  rec[kLocalError] = sig.local_error.empty() ? 0 : 1;
  int slot = kFirstTensor;
  for (const auto& t : sig.tensors) {
    if (slot + 2 + t.dim() > kSignatureSlots) break;
    rec[slot] = static_cast<int64_t>(t.scalar_type());
    rec[slot + 1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) rec[slot + 2 + d] = t.size(d);
    slot += 2 + static_cast<int>(t.dim());
  }
  return rec;
}

std::string compareSignatures(const Signature& mine, const int64_t* all, int world_size, int rank) {
  auto rec = [&](int r) { return all + static_cast<size_t>(r) * kSignatureSlots; };
  // The usual case, decided on the words alone: every record equal to this
  // rank's (which says no rank rejected its arguments).
  bool all_equal = mine.local_error.empty() && rec(rank)[kLocalError] == 0;
  for (int r = 0; all_equal && r < world_size; ++r)
    all_equal = std::equal(rec(r), rec(r) + kSignatureSlots, rec(rank));
  if (all_equal) return "";
  std::ostringstream os;
  os << "neuron collective " << mine.op << " on rank " << rank << ": ";
  // A rank whose own arguments were invalid raises its own message; the
  // others name it instead of waiting for it.
  std::vector<int> bad;
  for (int r = 0; r < world_size; ++r)
    if (rec(r)[kLocalError]) bad.push_back(r);
  if (!mine.local_error.empty()) return os.str() + mine.local_error;
  if (!bad.empty()) {
    os << "rank";
    if (bad.size() > 1) os << "s";
    for (size_t i = 0; i < bad.size(); ++i) os << (i ? ", " : " ") << bad[i];
    os << " rejected its arguments to this collective (see the error on that rank); no data was exchanged";
    return os.str();
  }
  bool same_op = true, same_root = true, same_red = true, same_tensors = true;
  for (int r = 0; r < world_size; ++r) {
    same_op &= rec(r)[kOpHash] == rec(0)[kOpHash];
    same_root &= rec(r)[kRoot] == rec(0)[kRoot];
    same_red &= rec(r)[kReduceOp] == rec(0)[kReduceOp];
    same_tensors &= rec(r)[kCount] == rec(0)[kCount] && rec(r)[kTensorsHash] == rec(0)[kTensorsHash];
  }
  if (same_op && same_root && same_red && same_tensors) return "";
  if (!same_op) {
    os << "the ranks are not running the same collective (this rank runs " << mine.op
       << " with " << (mine.tensors.empty() ? std::string("no tensors") : describeList(mine.tensors))
       << "); every rank of a group must issue the same collectives in the same order";
    return os.str();
  }
  auto perRank = [&](const char* what, auto value) {
    os << "ranks disagree on " << what << ": ";
    for (int r = 0; r < world_size; ++r) os << (r ? "; " : "") << "rank " << r << " has " << value(r);
  };
  if (!same_root) {
    perRank("the root rank", [&](int r) { return std::to_string(rec(r)[kRoot]); });
  } else if (!same_red) {
    perRank("the reduce op", [&](int r) { return std::to_string(rec(r)[kReduceOp]); });
  } else {
    perRank("the tensors' dtype or shape", [&](int r) { return decodeTensors(rec(r)); });
    os << " (every rank must pass tensors of the same dtype and shape)";
  }
  return os.str();
}

}  // namespace neuron_sim::distributed

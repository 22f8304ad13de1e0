// Einsum as planrt's permutes, reshapes, reductions and batched matmuls. An equation
// "ab,bc->ac" (explicit), or "ab,bc" (implicit: the output is the letters that appear once,
// in alphabetical order), with "..." standing for the dims of an operand no letter names.
// Operands are contracted left to right, two at a time:
//   1. a letter that appears in one operand only and is not needed later is summed out;
//   2. the two operands are permuted to [batch, free, contracted] and [batch, contracted,
//      free] (batch: in both and needed later; contracted: in both, not needed), reshaped to
//      3-D and multiplied (matmul), the result reshaped back to [batch, free A, free B];
// then the last one's letters are summed out and permuted to the output's order. A letter
// repeated within one operand (a diagonal) is not supported; dims a letter names in two
// operands must be equal (no broadcasting).
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/ops_support.h"

namespace planrt::importers::onnx {
namespace {

// An operand as the contraction sees it: its value and one letter per dim.
struct Term {
  Value value;
  std::string letters;
};

// The letters of one side of the equation, "..." replaced by `ellipsis` (one letter per
// unnamed dim, from characters no equation uses).
Result<std::string> expand_ellipsis(OpContext& c, std::string side, int rank, const std::string& ellipsis_letters) {
  const size_t at = side.find("...");
  if (at == std::string::npos) return side;
  if (side.find("...", at + 3) != std::string::npos) return c.error("has \"...\" twice in one term");
  const int named = static_cast<int>(side.size()) - 3;
  const int unnamed = rank - named;
  if (unnamed < 0 || unnamed > static_cast<int>(ellipsis_letters.size())) {
    return c.error(fmt::format("term '{}' does not fit an operand of rank {}", side, rank));
  }
  return side.substr(0, at) + ellipsis_letters.substr(ellipsis_letters.size() - static_cast<size_t>(unnamed)) +
         side.substr(at + 3);
}

Result<Value> permute_to(OpContext& c, const Term& t, const std::string& order, const std::string& name) {
  if (order == t.letters) return t.value;
  std::vector<int64_t> dims;
  for (char l : order) dims.push_back(static_cast<int64_t>(t.letters.find(l)));
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(t.value));
  return c.im.emit("permute", {in}, {{"dims", dims}}, name);
}

// t with the letters not in `keep` summed out (permuted to the end, then one reduction).
Result<Term> sum_out(OpContext& c, const Term& t, const std::set<char>& keep, const std::string& name) {
  std::string kept, dropped;
  for (char l : t.letters) (keep.contains(l) ? kept : dropped) += l;
  if (dropped.empty()) return t;
  PLANRT_ASSIGN_OR_RETURN(Value moved, permute_to(c, t, kept + dropped, name + ".moved"));
  std::vector<int64_t> dims(dropped.size());
  std::iota(dims.begin(), dims.end(), static_cast<int64_t>(kept.size()));
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(moved));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("reduce_sum", {in}, {{"dims", dims}, {"keepdim", false}}, name));
  return Term{std::move(y), kept};
}

SymInt size_of(const Term& t, char l) { return t.value.shape[t.letters.find(l)]; }

SymInt product_of(const Term& t, const std::string& letters) {
  std::vector<SymInt> dims;
  for (char l : letters) dims.push_back(size_of(t, l));
  return shape_product(dims, 0, dims.size());
}

// a (x) b over their shared letters; `later`: the letters needed after this step.
Result<Term> contract(OpContext& c, const Term& a0, const Term& b0, const std::set<char>& later, const std::string& name) {
  std::set<char> keep_a = later, keep_b = later;
  keep_a.insert(b0.letters.begin(), b0.letters.end());
  keep_b.insert(a0.letters.begin(), a0.letters.end());
  PLANRT_ASSIGN_OR_RETURN(Term a, sum_out(c, a0, keep_a, name + ".a"));
  PLANRT_ASSIGN_OR_RETURN(Term b, sum_out(c, b0, keep_b, name + ".b"));
  std::string batch, contracted, free_a, free_b;
  for (char l : a.letters) {
    if (b.letters.find(l) == std::string::npos) {
      free_a += l;
    } else {
      (later.contains(l) ? batch : contracted) += l;
      if (!(size_of(a, l) == size_of(b, l))) {
        return c.error(fmt::format("letter '{}' names dims of sizes {} and {}", l, c.im.shape_str({size_of(a, l)}),
                                   c.im.shape_str({size_of(b, l)})));
      }
    }
  }
  for (char l : b.letters) {
    if (a.letters.find(l) == std::string::npos) free_b += l;
  }
  PLANRT_ASSIGN_OR_RETURN(Value pa, permute_to(c, a, batch + free_a + contracted, name + ".lhs"));
  PLANRT_ASSIGN_OR_RETURN(Value pb, permute_to(c, b, batch + contracted + free_b, name + ".rhs"));
  const SymInt nb = product_of(a, batch), m = product_of(a, free_a), k = product_of(a, contracted);
  const SymInt n = product_of(b, free_b);
  PLANRT_ASSIGN_OR_RETURN(Value ma, reshape_to_shape(c, pa, {nb, m, k}, name + ".lhs3"));
  PLANRT_ASSIGN_OR_RETURN(Value mb, reshape_to_shape(c, pb, {nb, k, n}, name + ".rhs3"));
  PLANRT_ASSIGN_OR_RETURN(std::string ia, c.im.ir_of(ma));
  PLANRT_ASSIGN_OR_RETURN(std::string ib, c.im.ir_of(mb));
  PLANRT_ASSIGN_OR_RETURN(Value product, c.im.emit("matmul", {ia, ib}, {}, name + ".product"));
  std::vector<SymInt> shape;
  for (char l : batch + free_a) shape.push_back(size_of(a, l));
  for (char l : free_b) shape.push_back(size_of(b, l));
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to_shape(c, product, shape, name));
  return Term{std::move(y), batch + free_a + free_b};
}

Status handle_einsum(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(std::string equation, c.attr_string("equation", std::nullopt));
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> sides;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    sides.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (sides.size() != c.in.size()) {
    return c.error(fmt::format("equation '{}' has {} terms for {} inputs", equation, sides.size(), c.in.size()));
  }
  // Letters for the dims "..." stands for: characters no term uses.
  std::string ellipsis_letters;
  for (char l = 'A'; l <= 'Z' && ellipsis_letters.size() < 8; ++l) {
    if (equation.find(l) == std::string::npos) ellipsis_letters += l;
  }
  int ellipsis_rank = 0;
  std::vector<Term> terms;
  for (size_t i = 0; i < sides.size(); ++i) {
    PLANRT_RETURN_IF_ERROR(require_float_input(c, i));
    const Value& v = c.input(i);
    PLANRT_ASSIGN_OR_RETURN(std::string letters, expand_ellipsis(c, sides[i], v.rank(), ellipsis_letters));
    if (sides[i].find("...") != std::string::npos) {
      ellipsis_rank = std::max(ellipsis_rank, v.rank() - static_cast<int>(sides[i].size()) + 3);
    }
    if (static_cast<int>(letters.size()) != v.rank()) {
      return c.error(fmt::format("term '{}' names {} dims of an operand of rank {}", sides[i], letters.size(), v.rank()));
    }
    for (char l : letters) {
      if (!std::isalpha(static_cast<unsigned char>(l))) return c.error(fmt::format("'{}' is not a letter", l));
      if (std::count(letters.begin(), letters.end(), l) > 1) {
        return Status(ErrorCode::NotSupported,
                      fmt::format("Einsum with a letter repeated in one term ('{}': a diagonal)", sides[i]));
      }
    }
    terms.push_back({v, letters});
  }
  // The output's letters: as written, or those that appear once, alphabetically ("..." first).
  std::string out;
  const std::string ellipsis_out = ellipsis_letters.substr(ellipsis_letters.size() - static_cast<size_t>(ellipsis_rank));
  if (arrow != std::string::npos) {
    std::string rhs = equation.substr(arrow + 2);
    const size_t at = rhs.find("...");
    out = at == std::string::npos ? rhs : rhs.substr(0, at) + ellipsis_out + rhs.substr(at + 3);
  } else {
    std::map<char, int> count;
    for (const Term& t : terms) {
      for (char l : t.letters) ++count[l];
    }
    out = ellipsis_out;
    for (const auto& [l, n] : count) {
      if (n == 1 && ellipsis_out.find(l) == std::string::npos) out += l;
    }
  }
  for (char l : out) {
    bool named = false;
    for (const Term& t : terms) named = named || t.letters.find(l) != std::string::npos;
    if (!named) return c.error(fmt::format("output letter '{}' names no input dim", l));
  }
  const std::string& name = c.node.output(0);
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::set<char> later(out.begin(), out.end());
    for (size_t j = i + 1; j < terms.size(); ++j) later.insert(terms[j].letters.begin(), terms[j].letters.end());
    PLANRT_ASSIGN_OR_RETURN(acc, contract(c, acc, terms[i], later, fmt::format("{}.step{}", name, i)));
  }
  PLANRT_ASSIGN_OR_RETURN(acc, sum_out(c, acc, std::set<char>(out.begin(), out.end()), name + ".summed"));
  PLANRT_ASSIGN_OR_RETURN(Value y, permute_to(c, acc, out, name));
  c.out.push_back(std::move(y));
  return {};
}

// clang-format off
const OpSpec kEinsumOps[] = {
    {"Einsum", 1, -1, 1, {"equation"}, handle_einsum},
};
// clang-format on

}  // namespace

const std::span<const OpSpec> einsum_ops = kEinsumOps;

}  // namespace planrt::importers::onnx

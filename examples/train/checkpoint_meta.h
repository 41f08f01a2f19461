#pragma once
// The metadata of a strata_train checkpoint, read with every field checked: present,
// of its type (an integer in digits, a real number, one of a set of words) and in
// its range. A failure is a strata::Error naming the file, the field, its value and
// what was expected, e.g.
//   checkpoint 'run.safetensors': metadata 'strata.train.epoch' = '99999999999999999999'
//   is not an integer in [0, 2]
// Checks between fields (consistency with each other and with the run) are the
// callers'; they report through fail().
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

namespace strata::train {

class CheckpointMeta {
 public:
  CheckpointMeta(const std::map<std::string, std::string>& metadata, std::string path);

  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return m_.count(key) != 0; }
  // The raw text; a missing key is an error ("lacks metadata").
  const std::string& text(const std::string& key) const;
  int64_t integer(const std::string& key, int64_t lo, int64_t hi) const;
  uint64_t unsigned_integer(const std::string& key) const;
  double real(const std::string& key, double lo, double hi) const;  // decimal or hex (%a)
  const std::string& one_of(const std::string& key, std::initializer_list<const char*> words) const;

  // "checkpoint '<path>': metadata '<key>' = '<value>' <why>".
  [[noreturn]] void fail(const std::string& key, const std::string& why) const;

 private:
  const std::map<std::string, std::string>& m_;
  std::string path_;
};

}  // namespace strata::train

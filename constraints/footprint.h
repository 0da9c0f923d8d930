// Estimates of the heap memory standard containers hold, for the bytes a compiled grammar
// reports (tsr_constraint_iface::grammar_bytes): capacities rather than sizes, and the
// per-node and bucket overhead of libstdc++'s hash maps. Estimates, but never of nothing:
// the host bounds its grammar cache by them.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace tsr::constraints {

// Beyond the small-string buffer inside the object.
inline size_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

template <class T>
size_t heap_bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// Nodes (the pair, a next pointer and the cached hash) and the bucket array; not what the
// keys and values hold on the heap themselves.
template <class K, class V>
size_t heap_bytes(const std::unordered_map<K, V>& m) {
  return m.size() * (sizeof(typename std::unordered_map<K, V>::value_type) + 2 * sizeof(void*)) +
         m.bucket_count() * sizeof(void*);
}

}  // namespace tsr::constraints

/*
 * timers_heap.cc — the baseline of //bench:timers: a plain binary min-heap
 * of (deadline, seq) pairs, the algorithm of std::priority_queue
 * (std::push_heap / std::pop_heap with std::greater), on a std::vector
 * that is kept between rounds, as the library keeps its timer heap.
 *
 * It answers: what does the timer *structure* alone cost, with no
 * coroutine around it? Push N deadlines in the order the coroutines set
 * them, then pop them all, checking that they come out in order.
 */
#include "timers_heap.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace {

using Timer = std::pair<std::uint64_t, std::uint64_t>; // (deadline, seq)

std::vector<Timer> heap;

} // namespace

extern "C" int timers_heap_reserve(size_t n) {
    try {
        heap.reserve(n);
    } catch (...) {
        return -1;
    }
    return 0;
}

extern "C" void timers_heap_push_all(const uint64_t *deadlines, size_t n) {
    heap.clear(); // keeps the capacity: no allocation in a round
    for (size_t i = 0; i < n; i++) {
        heap.emplace_back(deadlines[i], i);
        std::push_heap(heap.begin(), heap.end(), std::greater<Timer>());
    }
}

extern "C" size_t timers_heap_pop_all(uint64_t *checksum) {
    size_t out_of_order = 0;
    Timer last{0, 0};
    std::uint64_t sum = 0;

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<Timer>());
        Timer t = heap.back();
        heap.pop_back();
        if (t < last)
            out_of_order++;
        last = t;
        sum += t.second;
    }
    *checksum = sum;
    return out_of_order;
}

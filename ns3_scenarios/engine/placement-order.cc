#include "cosim-engine.h"

#include <algorithm>
#include <vector>

namespace cosim
{

uint64_t
PlacementOrder(const int64_t* depPtr,
               const int64_t* depIdx,
               uint64_t nOps,
               const int32_t* callOfOp,
               const int64_t* callPtr,
               const int64_t* callOps,
               uint64_t nCalls,
               const int32_t* recvOfSend,
               int64_t* item,
               uint8_t* isCall,
               uint64_t capacity)
{
    const auto n = static_cast<int64_t>(nOps);
    // Dependents of each op, each op's list in the order of the dependency lists (a stable counting sort).
    // Trace op indices fit int32 (the lowering's own arrays hold them so), which halves this pass's memory.
    std::vector<int64_t> childPtr(n + 1, 0);
    for (int64_t e = 0; e < depPtr[n]; ++e)
    {
        ++childPtr[depIdx[e] + 1];
    }
    for (int64_t i = 0; i < n; ++i)
    {
        childPtr[i + 1] += childPtr[i];
    }
    std::vector<int32_t> children(depPtr[n]);
    for (int64_t i = 0; i < n; ++i)
    {
        for (int64_t e = depPtr[i]; e < depPtr[i + 1]; ++e)
        {
            children[childPtr[depIdx[e]]++] = static_cast<int32_t>(i);
        }
    }
    for (int64_t i = n; i > 0; --i) // each entry moved one place by the fill: back to its list's start
    {
        childPtr[i] = childPtr[i - 1];
    }
    childPtr[0] = 0;
    std::vector<int32_t> remaining(n);
    for (int64_t i = 0; i < n; ++i)
    {
        remaining[i] = static_cast<int32_t>(depPtr[i + 1] - depPtr[i]);
    }
    for (int64_t i = 0; i < n; ++i) // a recv also waits for its send: once, however many sends name it
    {
        if (recvOfSend[i] >= 0 && remaining[recvOfSend[i]] >= 0)
        {
            remaining[recvOfSend[i]] = -1 - remaining[recvOfSend[i]]; // marked: counted below
        }
    }
    for (int64_t i = 0; i < n; ++i)
    {
        if (remaining[i] < 0)
        {
            remaining[i] = -remaining[i];
        }
    }
    std::vector<int64_t> pending(nCalls);
    for (uint64_t c = 0; c < nCalls; ++c)
    {
        pending[c] = callPtr[c + 1] - callPtr[c];
    }
    // Level by level (each level in increasing op index): an op's place then depends only on its depth in the
    // graph and its index, so identical parts of the graph (the rails of a training job) are laid out alike.
    std::vector<int32_t> level;
    std::vector<int32_t> next;
    for (int64_t i = 0; i < n; ++i)
    {
        if (remaining[i] == 0)
        {
            level.push_back(static_cast<int32_t>(i));
        }
    }
    auto release = [&](int64_t j) {
        for (int64_t e = childPtr[j]; e < childPtr[j + 1]; ++e)
        {
            if (--remaining[children[e]] == 0)
            {
                next.push_back(children[e]);
            }
        }
    };
    uint64_t placed = 0;
    while (!level.empty() && placed < capacity)
    {
        for (const int32_t i : level)
        {
            if (placed >= capacity)
            {
                break;
            }
            const int32_t c = callOfOp[i];
            if (c >= 0)
            {
                if (--pending[c] != 0)
                {
                    continue;
                }
                item[placed] = c;
                isCall[placed++] = 1;
                for (int64_t m = callPtr[c]; m < callPtr[c + 1]; ++m)
                {
                    release(callOps[m]);
                }
                continue;
            }
            item[placed] = i;
            isCall[placed++] = 0;
            const int32_t r = recvOfSend[i];
            if (r >= 0 && --remaining[r] == 0)
            {
                next.push_back(r);
            }
            release(i);
        }
        std::sort(next.begin(), next.end());
        level.swap(next);
        next.clear();
    }
    return placed;
}

} // namespace cosim

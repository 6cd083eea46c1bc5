/**
 * @file
 * @ingroup cosim
 * An ns-3 event scheduler for packet simulations: a timing wheel of short time buckets for the near
 * future, plus a binary heap for the few events beyond the wheel's horizon.
 */
#ifndef COSIM_TIMING_WHEEL_SCHEDULER_H
#define COSIM_TIMING_WHEEL_SCHEDULER_H

#include "ns3/assert.h"
#include "ns3/nstime.h"
#include "ns3/scheduler.h"

#include <bit>
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Event queue tuned to a packet fabric's event mix: most events fall within a few µs of now
 * (serializations, propagations, credit and ACK returns), a few far ones (timers, the run's time limit).
 *
 * The near future is a ring of `Buckets` buckets, each `BucketWidth` of simulated time wide, so the
 * wheel covers `Buckets × BucketWidth` from the bucket of the last event removed. An event inside that
 * horizon goes to its bucket, which keeps its events sorted by (timestamp, uid), the order every ns-3
 * scheduler gives, so equal timestamps keep their insertion order. Synchronized ports schedule hundreds
 * of events at one timestamp, interleaved with events at another timestamp of the same bucket, so a
 * bucket is a short list of timestamp groups, each a list in uid order: an insert finds its group among
 * the few of its bucket (usually the last) and appends at the group's tail (ns-3's uids increase). A bitmap of occupied buckets (and a
 * second bitmap of occupied bitmap words) finds the next occupied bucket in a few instructions. An event
 * beyond the horizon goes to a binary min-heap and moves into the wheel once the wheel's start comes
 * within a horizon of it. The next event is the earlier of the first occupied bucket's head and the
 * heap's top.
 *
 * Events and groups are elements of two arrays, linked by index and recycled through free lists:
 * inserting allocates only when more events are pending than ever before. Insert and RemoveNext cost
 * O(1) plus a walk over the timestamp groups of one bucket for near events, O(log far) for far ones.
 *
 * Correct for any timestamps (an event outside the wheel's window is simply kept in the heap); fast when
 * most pending events are within a horizon of now.
 */
class TimingWheelScheduler final : public Scheduler
{
  public:
    /// @return the TypeId, with the BucketWidth and Buckets attributes
    static TypeId GetTypeId();

    /// Insert without the virtual call, inlined where the simulator core queues an event.
    void InsertEvent(const Scheduler::Event& ev);
    /**
     * RemoveNext without the virtual call, inlined into the simulator core's loop. With the `Prefetch`
     * attribute on, it also starts loading the object the following event runs and the node of the event
     * after that into the cache, so that they arrive while the core runs this one (a fabric touches enough
     * between an event's insertion and its turn for both to leave the nearest caches). Changes speed only.
     */
    Scheduler::Event RemoveNextEvent();

    TimingWheelScheduler();
    ~TimingWheelScheduler() override;
    TimingWheelScheduler(const TimingWheelScheduler&) = delete;
    TimingWheelScheduler& operator=(const TimingWheelScheduler&) = delete;

    void Insert(const Scheduler::Event& ev) override;
    bool IsEmpty() const override;
    Scheduler::Event PeekNext() const override;
    Scheduler::Event RemoveNext() override;
    void Remove(const Scheduler::Event& ev) override;

    /**
     * @return the scheduler the simulator uses now, if it is a TimingWheelScheduler (else null). A
     * partitioned run reads the time of its next event between windows, which ns-3's Simulator does not
     * tell; the events cancelled but not yet removed count, so that time may be early, never late.
     */
    static const TimingWheelScheduler* Current();

  protected:
    /// Size the wheel from the attributes (they are set by then).
    void NotifyConstructionCompleted() override;

  private:
    static constexpr uint32_t kNone = UINT32_MAX; ///< end of a list, no node, no group

    /// One pending event of the wheel, linked to the next one of its timestamp group (or of the free list).
    struct Node
    {
        Scheduler::Event ev; ///< the event
        uint32_t next;       ///< next node of the same group, by uid (kNone at the end)
    };

    /// The events of one bucket that share one timestamp, in uid order, linked to the bucket's next group.
    struct Group
    {
        uint64_t ts;   ///< the timestamp, in time steps
        uint32_t head; ///< first node (smallest uid)
        uint32_t tail; ///< last node (largest uid)
        uint32_t next; ///< the bucket's next (later) group, or the next free group; kNone at the end
    };

    /// One bucket of the ring: its groups, earliest timestamp first.
    struct Bucket
    {
        uint32_t first; ///< earliest group, kNone if the bucket is empty
        uint32_t last;  ///< latest group (valid while first is not kNone)
    };

    /// Where the next event is: a bucket of the wheel or the far heap.
    struct Next
    {
        uint32_t slot; ///< bucket index in the ring, kNone if the next event is in the far heap
        bool found;    ///< false when no event is pending
    };

    /// @return the bucket number (absolute, not wrapped) of timestamp @p ts
    uint64_t BucketOf(uint64_t ts) const
    {
        return ts >> m_widthShift;
    }

    /// @return true if bucket number @p bucket lies in the wheel's window [m_start, m_start + Buckets)
    bool InWindow(uint64_t bucket) const
    {
        return bucket - m_startBucket <= m_slotMask; // unsigned: a bucket before the start wraps to huge
    }

    /// Put @p ev in its bucket's group of its timestamp (its bucket must be in the window).
    void InsertNear(const Scheduler::Event& ev);
    /// Put node @p node in the group of its timestamp in @p slot's bucket, earlier than the bucket's last
    /// group (walks the groups).
    void InsertBeforeLastGroup(uint32_t slot, uint32_t node);
    /// Put node @p node at the place of its uid in group @p group (of the same timestamp).
    void AddToGroup(uint32_t group, uint32_t node);
    /// @return a free node holding @p ev
    uint32_t NewNode(const Scheduler::Event& ev);
    /// @return a free group of timestamp @p ts holding only node @p node
    uint32_t NewGroup(uint64_t ts, uint32_t node);
    /// Push @p ev on the far heap.
    void InsertFar(const Scheduler::Event& ev);
    /// @return the first occupied bucket at or after the wheel's start, in ring order (kNone if none)
    uint32_t FirstOccupiedSlot() const;
    /// @return the first occupied bucket after the bitmap word of slot @p from, in ring order
    uint32_t FirstOccupiedSlotAfterWord(uint32_t from) const;
    /// Move the far events that are now inside the window into the wheel.
    void PullFarIntoWindow();
    /// @return where the earliest pending event is
    Next FindNext() const;
    /// Unlink the head of bucket @p slot; @return its event
    Scheduler::Event PopSlot(uint32_t slot);
    /// Unlink the event of @p key from bucket @p slot; @return false if it is not there
    bool RemoveNear(uint32_t slot, const Scheduler::EventKey& key);
    /// Pop the far heap's top; @return it
    Scheduler::Event PopFar();
    /// Pop the far heap's top while it is an event removed (Remove), so that its top is always pending.
    void DropRemovedFarTop();
    /// Set m_farTopTs from the far heap's top.
    void NoteFarTop()
    {
        m_farTopTs = m_far.empty() ? UINT64_MAX : m_far.front().key.m_ts;
    }
    /// Move the wheel's start to bucket @p bucket and pull the far events now inside the window.
    void Advance(uint64_t bucket);
    /// Prefetch the object bucket @p slot's first event runs and the node of the event after it (nothing
    /// for kNone).
    void PrefetchAhead(uint32_t slot) const;
    /// Mark bucket @p slot occupied in both bitmaps.
    void MarkOccupied(uint32_t slot);
    /// Mark bucket @p slot empty (it has just become so) in both bitmaps.
    void MarkEmpty(uint32_t slot);

    Time m_bucketWidth;                  ///< BucketWidth attribute (rounded down to a power of two time steps)
    uint32_t m_bucketsAttribute;         ///< Buckets attribute (rounded up to a power of two)
    bool m_prefetch{true};               ///< Prefetch attribute
    uint32_t m_widthShift{0};            ///< log2 of the bucket width, in time steps
    uint64_t m_slotMask{0};              ///< buckets in the ring − 1
    uint64_t m_startBucket{0};           ///< bucket number of the wheel's first bucket (of the last event removed)
    uint64_t m_nearCount{0};             ///< events in the wheel
    std::vector<Bucket> m_buckets;       ///< the ring
    std::vector<uint64_t> m_occupied;    ///< one bit per ring slot: its bucket holds events
    std::vector<uint64_t> m_occupiedWords; ///< one bit per word of m_occupied: that word is non-zero
    std::vector<Node> m_nodes;           ///< node storage of the wheel's events
    uint32_t m_freeNode{kNone};          ///< first free node
    std::vector<Group> m_groups;         ///< group storage
    uint32_t m_freeGroup{kNone};         ///< first free group
    std::vector<Scheduler::Event> m_far; ///< binary min-heap of events beyond the window, by (ts, uid)
    uint64_t m_farTopTs{UINT64_MAX};     ///< timestamp of m_far's top (UINT64_MAX: m_far is empty)
    std::unordered_set<uint64_t> m_farRemoved; ///< uids of m_far's events removed but not yet popped
};

// The common paths of Insert and RemoveNext, inline so that the simulator core runs them without a call;
// rare paths (far heap, walks, a wrap of the ring) stay out of line in the .cc.

inline void
TimingWheelScheduler::MarkOccupied(uint32_t slot)
{
    m_occupied[slot >> 6] |= uint64_t(1) << (slot & 63);
    m_occupiedWords[slot >> 12] |= uint64_t(1) << ((slot >> 6) & 63);
}

inline void
TimingWheelScheduler::MarkEmpty(uint32_t slot)
{
    uint64_t& word = m_occupied[slot >> 6];
    word &= ~(uint64_t(1) << (slot & 63));
    if (word == 0)
    {
        m_occupiedWords[slot >> 12] &= ~(uint64_t(1) << ((slot >> 6) & 63));
    }
}

inline __attribute__((always_inline)) uint32_t
TimingWheelScheduler::NewNode(const Scheduler::Event& ev)
{
    uint32_t node = m_freeNode;
    if (node == kNone)
    {
        node = uint32_t(m_nodes.size());
        m_nodes.push_back(Node{});
    }
    else
    {
        m_freeNode = m_nodes[node].next;
    }
    // Field by field: a copy of the whole event reads it back as wide loads from the caller's stack,
    // which the stores that built it there cannot forward to (a stall on every insert).
    Node& n = m_nodes[node];
    n.ev.impl = ev.impl;
    n.ev.key.m_ts = ev.key.m_ts;
    n.ev.key.m_uid = ev.key.m_uid;
    n.ev.key.m_context = ev.key.m_context;
    n.next = kNone;
    return node;
}

inline __attribute__((always_inline)) uint32_t
TimingWheelScheduler::NewGroup(uint64_t ts, uint32_t node)
{
    uint32_t group = m_freeGroup;
    if (group == kNone)
    {
        group = uint32_t(m_groups.size());
        m_groups.push_back(Group{});
    }
    else
    {
        m_freeGroup = m_groups[group].next;
    }
    m_groups[group] = Group{ts, node, node, kNone};
    return group;
}

inline __attribute__((always_inline)) void
TimingWheelScheduler::AddToGroup(uint32_t group, uint32_t node)
{
    Group& g = m_groups[group];
    const uint32_t uid = m_nodes[node].ev.key.m_uid;
    if (m_nodes[g.tail].ev.key.m_uid < uid)
    {
        m_nodes[g.tail].next = node;
        g.tail = node;
        return;
    }
    // An older uid than the group's last (not seen from ns-3's simulator, whose uids increase): walk.
    uint32_t* link = &g.head;
    while (m_nodes[*link].ev.key.m_uid < uid)
    {
        link = &m_nodes[*link].next;
    }
    m_nodes[node].next = *link;
    *link = node;
}

inline __attribute__((always_inline)) void
TimingWheelScheduler::InsertNear(const Scheduler::Event& ev)
{
    const uint32_t node = NewNode(ev);
    ++m_nearCount;
    const uint64_t ts = ev.key.m_ts;
    const uint32_t slot = uint32_t(BucketOf(ts) & m_slotMask);
    Bucket& bucket = m_buckets[slot];
    if (bucket.first == kNone)
    {
        MarkOccupied(slot);
        const uint32_t group = NewGroup(ts, node);
        m_buckets[slot] = Bucket{group, group};
        return;
    }
    const uint64_t lastTs = m_groups[bucket.last].ts;
    if (lastTs == ts)
    {
        AddToGroup(bucket.last, node);
    }
    else if (lastTs < ts)
    {
        const uint32_t group = NewGroup(ts, node); // may move m_groups, not m_buckets
        m_groups[bucket.last].next = group;
        bucket.last = group;
    }
    else
    {
        InsertBeforeLastGroup(slot, node);
    }
}

inline __attribute__((always_inline)) uint32_t
TimingWheelScheduler::FirstOccupiedSlot() const
{
    if (m_nearCount == 0)
    {
        return kNone;
    }
    // Every wheel event's bucket is in [start, start + Buckets), so ring order from the start's slot is
    // time order: search up to the ring's end, then wrap around to its beginning.
    const uint32_t from = uint32_t(m_startBucket & m_slotMask);
    const uint32_t w = from >> 6;
    if (const uint64_t bits = m_occupied[w] & (~uint64_t(0) << (from & 63)); bits != 0)
    {
        return (w << 6) | uint32_t(std::countr_zero(bits));
    }
    return FirstOccupiedSlotAfterWord(from);
}

inline __attribute__((always_inline)) TimingWheelScheduler::Next
TimingWheelScheduler::FindNext() const
{
    const uint32_t slot = FirstOccupiedSlot();
    if (slot == kNone)
    {
        return {kNone, !m_far.empty()};
    }
    // The bucket's first group has the earliest timestamp; only a far event at the same timestamp needs
    // the uids compared (none when m_far is empty).
    const Group& first = m_groups[m_buckets[slot].first];
    if (first.ts < m_farTopTs || (first.ts == m_farTopTs && m_nodes[first.head].ev.key < m_far.front().key))
    {
        return {slot, true};
    }
    return {kNone, true};
}

inline __attribute__((always_inline)) Scheduler::Event
TimingWheelScheduler::PopSlot(uint32_t slot)
{
    Bucket& bucket = m_buckets[slot];
    const uint32_t group = bucket.first;
    Group& g = m_groups[group];
    const uint32_t node = g.head;
    Node& n = m_nodes[node];
    g.head = n.next;
    if (g.head == kNone)
    {
        bucket.first = g.next;
        g.next = m_freeGroup;
        m_freeGroup = group;
        if (bucket.first == kNone)
        {
            MarkEmpty(slot);
        }
    }
    n.next = m_freeNode;
    m_freeNode = node;
    --m_nearCount;
    return n.ev;
}

inline __attribute__((always_inline)) void
TimingWheelScheduler::Advance(uint64_t bucket)
{
    // The event just removed was the earliest, so no wheel event lies in a bucket before its own. Every
    // pending far event lies beyond the window (inserted so, pulled in as the window reached it), so only
    // a move of the window can bring one inside.
    if (bucket > m_startBucket)
    {
        m_startBucket = bucket;
        if (InWindow(BucketOf(m_farTopTs)))
        {
            PullFarIntoWindow();
        }
    }
}

inline __attribute__((always_inline)) void
TimingWheelScheduler::InsertEvent(const Scheduler::Event& ev)
{
    if (InWindow(BucketOf(ev.key.m_ts)))
    {
        InsertNear(ev);
    }
    else
    {
        InsertFar(ev);
    }
}

inline __attribute__((always_inline)) void
TimingWheelScheduler::PrefetchAhead(uint32_t slot) const
{
    if (slot == kNone)
    {
        return;
    }
    // Two events deep, so that no prefetch waits on a load: the next event's node was prefetched when the
    // event before it was removed, so it is read here to prefetch the object it runs and the node of the
    // event after it (same group, or the head of the bucket's next group; none across buckets).
    const Group& g = m_groups[m_buckets[slot].first];
    const Node& n = m_nodes[g.head];
    const uintptr_t impl = reinterpret_cast<uintptr_t>(n.ev.impl);
    const char* object = reinterpret_cast<const char*>(impl & ~uintptr_t(1));
    __builtin_prefetch(object);
    if (impl & 1)
    {
        // a DirectEvent (the simulator core's tag bit) is a member of the object it runs, which keeps what
        // its handler reads within the lines after it (EgressPort)
        __builtin_prefetch(object + 64);
        __builtin_prefetch(object + 128);
        __builtin_prefetch(object + 192);
    }
    const uint32_t after = n.next != kNone ? n.next : g.next != kNone ? m_groups[g.next].head : kNone;
    if (after != kNone)
    {
        __builtin_prefetch(&m_nodes[after]);
    }
}

inline __attribute__((always_inline)) Scheduler::Event
TimingWheelScheduler::RemoveNextEvent()
{
    const Next next = FindNext();
    NS_ASSERT_MSG(next.found, "RemoveNext on an empty scheduler");
    const Scheduler::Event ev = next.slot != kNone ? PopSlot(next.slot) : PopFar();
    Advance(BucketOf(ev.key.m_ts));
    if (m_prefetch)
    {
        // a bucket that still holds events after its first was taken is still the first occupied one
        const bool more = next.slot != kNone && m_buckets[next.slot].first != kNone;
        PrefetchAhead(more ? next.slot : FirstOccupiedSlot());
    }
    return ev;
}

} // namespace ns3

#endif // COSIM_TIMING_WHEEL_SCHEDULER_H

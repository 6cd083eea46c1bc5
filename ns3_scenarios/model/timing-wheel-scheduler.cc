#include "timing-wheel-scheduler.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <bit>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(TimingWheelScheduler);

namespace
{
/// Heap order of the far events: std::*_heap build max-heaps, so "less" is "later" here.
bool
Later(const Scheduler::Event& a, const Scheduler::Event& b)
{
    return b.key < a.key;
}

/// @return the index of the first set bit of @p words at or after bit @p from, or UINT32_MAX if none
uint32_t
FirstSetBitFrom(const std::vector<uint64_t>& words, uint32_t from)
{
    uint32_t w = from >> 6;
    if (w >= words.size())
    {
        return UINT32_MAX;
    }
    uint64_t bits = words[w] & (~uint64_t(0) << (from & 63));
    while (bits == 0)
    {
        if (++w == words.size())
        {
            return UINT32_MAX;
        }
        bits = words[w];
    }
    return (w << 6) | uint32_t(std::countr_zero(bits));
}
} // namespace

TypeId
TimingWheelScheduler::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::TimingWheelScheduler")
            .SetParent<Scheduler>()
            .SetGroupName("Cosim")
            .AddConstructor<TimingWheelScheduler>()
            .AddAttribute("BucketWidth",
                          "Simulated time one bucket of the wheel spans, rounded down to a power of two time "
                          "steps (ps; at least 1 ps): 5 ns gives 4,096 ps. Events closer together share a "
                          "bucket's sorted list, which thousands of ports sending at once make long (at "
                          "2,048 ports per switch 256 ps with 131,072 Buckets is faster). Changes speed "
                          "only, never the event order.",
                          TimeValue(NanoSeconds(5)),
                          MakeTimeAccessor(&TimingWheelScheduler::m_bucketWidth),
                          MakeTimeChecker())
            .AddAttribute("Buckets",
                          "Buckets in the wheel (a count), rounded up to a power of two; Buckets x BucketWidth is the "
                          "horizon beyond which events wait in a heap. Changes speed only, never the event "
                          "order.",
                          UintegerValue(8192),
                          MakeUintegerAccessor(&TimingWheelScheduler::m_bucketsAttribute),
                          MakeUintegerChecker<uint32_t>(64, 1U << 22))
            .AddAttribute("Prefetch",
                          "While the simulator core runs an event, prefetch the object the next event runs "
                          "and the node of the event after it (a dozen instructions per event, against two "
                          "cache misses on a fabric whose ports and pending events outgrow the nearest "
                          "caches). Changes speed only, never the event order.",
                          BooleanValue(true),
                          MakeBooleanAccessor(&TimingWheelScheduler::m_prefetch),
                          MakeBooleanChecker());
    return tid;
}

namespace
{
/// the scheduler last constructed and not yet destroyed (ns-3 holds one simulator per process)
const TimingWheelScheduler* g_current = nullptr;
} // namespace

TimingWheelScheduler::TimingWheelScheduler() = default;

TimingWheelScheduler::~TimingWheelScheduler()
{
    if (g_current == this)
    {
        g_current = nullptr;
    }
}

const TimingWheelScheduler*
TimingWheelScheduler::Current()
{
    return g_current;
}

void
TimingWheelScheduler::NotifyConstructionCompleted()
{
    const int64_t steps = std::max<int64_t>(m_bucketWidth.GetTimeStep(), 1);
    m_widthShift = uint32_t(std::bit_width(uint64_t(steps)) - 1);
    const uint64_t buckets = std::bit_ceil(uint64_t(std::max<uint32_t>(m_bucketsAttribute, 64)));
    m_slotMask = buckets - 1;
    m_buckets.assign(buckets, Bucket{kNone, kNone});
    m_occupied.assign(buckets / 64, 0);
    m_occupiedWords.assign((buckets / 64 + 63) / 64, 0);
    g_current = this;
    Scheduler::NotifyConstructionCompleted();
}



void
TimingWheelScheduler::Insert(const Scheduler::Event& ev)
{
    InsertEvent(ev);
}





// Out of line: less common, and keeping it apart leaves InsertNear's common paths few registers to save.
__attribute__((noinline)) void
TimingWheelScheduler::InsertBeforeLastGroup(uint32_t slot, uint32_t node)
{
    const uint64_t ts = m_nodes[node].ev.key.m_ts;
    uint32_t previous = kNone;
    uint32_t group = m_buckets[slot].first;
    while (m_groups[group].ts < ts) // stops at the last group at the latest: its timestamp is later
    {
        previous = group;
        group = m_groups[group].next;
    }
    if (m_groups[group].ts == ts)
    {
        AddToGroup(group, node);
        return;
    }
    const uint32_t fresh = NewGroup(ts, node);
    m_groups[fresh].next = group;
    if (previous == kNone)
    {
        m_buckets[slot].first = fresh;
    }
    else
    {
        m_groups[previous].next = fresh;
    }
}

__attribute__((noinline)) void
TimingWheelScheduler::InsertFar(const Scheduler::Event& ev)
{
    m_far.push_back(ev);
    std::push_heap(m_far.begin(), m_far.end(), Later);
    NoteFarTop();
}

bool
TimingWheelScheduler::IsEmpty() const
{
    return m_nearCount == 0 && m_far.empty();
}


__attribute__((noinline)) uint32_t
TimingWheelScheduler::FirstOccupiedSlotAfterWord(uint32_t from) const
{
    const uint32_t w = from >> 6;
    uint32_t word = FirstSetBitFrom(m_occupiedWords, w + 1);
    if (word == UINT32_MAX)
    {
        word = FirstSetBitFrom(m_occupiedWords, 0);
    }
    NS_ASSERT_MSG(word != UINT32_MAX, "the wheel counts events but no bucket is marked occupied");
    return (word << 6) | uint32_t(std::countr_zero(m_occupied[word]));
}


Scheduler::Event
TimingWheelScheduler::PeekNext() const
{
    const Next next = FindNext();
    NS_ASSERT_MSG(next.found, "PeekNext on an empty scheduler");
    return next.slot != kNone ? m_nodes[m_groups[m_buckets[next.slot].first].head].ev : m_far.front();
}


__attribute__((noinline)) Scheduler::Event
TimingWheelScheduler::PopFar()
{
    std::pop_heap(m_far.begin(), m_far.end(), Later);
    const Scheduler::Event ev = m_far.back();
    m_far.pop_back();
    DropRemovedFarTop();
    return ev;
}


__attribute__((noinline)) void
TimingWheelScheduler::PullFarIntoWindow()
{
    while (!m_far.empty() && InWindow(BucketOf(m_far.front().key.m_ts)))
    {
        InsertNear(PopFar());
    }
}

Scheduler::Event
TimingWheelScheduler::RemoveNext()
{
    return RemoveNextEvent();
}

void
TimingWheelScheduler::Remove(const Scheduler::Event& ev)
{
    const uint64_t bucket = BucketOf(ev.key.m_ts);
    if (InWindow(bucket))
    {
        if (RemoveNear(uint32_t(bucket & m_slotMask), ev.key))
        {
            return;
        }
    }
    // Events outside the window wait in the far heap (the window's events all moved into the wheel). Taking
    // one out of the middle would cost a search and a heap rebuild (a sender removes its retransmission
    // timer, far ahead, at every flow's last ACK): it is marked instead, and dropped when it reaches the top.
    const bool fresh = m_farRemoved.insert(ev.key.m_uid).second;
    NS_ASSERT_MSG(fresh, "Remove of an event already removed");
    DropRemovedFarTop();
}

void
TimingWheelScheduler::DropRemovedFarTop()
{
    while (!m_far.empty())
    {
        const auto it = m_farRemoved.find(m_far.front().key.m_uid);
        if (it == m_farRemoved.end())
        {
            break;
        }
        m_farRemoved.erase(it);
        std::pop_heap(m_far.begin(), m_far.end(), Later);
        m_far.pop_back();
    }
    NoteFarTop();
}

bool
TimingWheelScheduler::RemoveNear(uint32_t slot, const Scheduler::EventKey& key)
{
    Bucket& bucket = m_buckets[slot];
    uint32_t previousGroup = kNone;
    uint32_t group = bucket.first;
    while (group != kNone && m_groups[group].ts != key.m_ts)
    {
        previousGroup = group;
        group = m_groups[group].next;
    }
    if (group == kNone)
    {
        return false;
    }
    Group& g = m_groups[group];
    uint32_t previous = kNone;
    uint32_t node = g.head;
    while (node != kNone && m_nodes[node].ev.key.m_uid != key.m_uid)
    {
        previous = node;
        node = m_nodes[node].next;
    }
    if (node == kNone)
    {
        return false;
    }
    (previous == kNone ? g.head : m_nodes[previous].next) = m_nodes[node].next;
    if (g.tail == node)
    {
        g.tail = previous;
    }
    m_nodes[node].next = m_freeNode;
    m_freeNode = node;
    --m_nearCount;
    if (g.head != kNone)
    {
        return true;
    }
    // The group is empty: unlink it from its bucket.
    (previousGroup == kNone ? bucket.first : m_groups[previousGroup].next) = g.next;
    if (bucket.last == group)
    {
        bucket.last = previousGroup;
    }
    g.next = m_freeGroup;
    m_freeGroup = group;
    if (bucket.first == kNone)
    {
        MarkEmpty(slot);
    }
    return true;
}

} // namespace ns3

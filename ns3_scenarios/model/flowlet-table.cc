#include "flowlet-table.h"

#include "ns3/assert.h"

namespace ns3
{

void
FlowletTable::Resize(uint32_t entries)
{
    NS_ASSERT_MSG(entries > 0, "a flowlet table needs at least one bucket");
    m_entries.assign(entries, Entry{0, -1, 0});
    m_flowlets = 0;
}

int32_t
FlowletTable::Continue(uint64_t hash, int64_t nowPs, int64_t gapPs)
{
    NS_ASSERT_MSG(!m_entries.empty(), "flowlet table used before Resize");
    Entry& e = m_entries[hash % m_entries.size()];
    if (e.lastPs < 0 || e.hash != hash || nowPs - e.lastPs > gapPs)
    {
        return -1;
    }
    e.lastPs = nowPs;
    return e.port;
}

void
FlowletTable::Start(uint64_t hash, int64_t nowPs, uint16_t port)
{
    Entry& e = m_entries[hash % m_entries.size()];
    e = Entry{hash, nowPs, port};
    ++m_flowlets;
}

} // namespace ns3

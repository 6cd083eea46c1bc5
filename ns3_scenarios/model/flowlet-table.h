/**
 * @file
 * @ingroup cosim
 * Flowlet switching's state: per hash bucket, the port of the current flowlet and when it last sent.
 */
#ifndef COSIM_FLOWLET_TABLE_H
#define COSIM_FLOWLET_TABLE_H

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief A fixed-size table of flowlets, indexed by ECMP hash as switch ASICs do.
 *
 * A flowlet is a burst of one flow's packets with no gap longer than the timeout between them. Packets of
 * a flowlet keep its port; the first packet after a gap may take another (the switch picks the least
 * loaded), which cannot reorder the flow when the gap exceeds the difference of the paths' delays. Two
 * flows whose hashes share a bucket evict each other (the full hash is kept to tell them apart), so a
 * collision only starts a new flowlet early. Plain state owned by FabricSwitch; sized once.
 */
class FlowletTable
{
  public:
    /// Size the table to @p entries buckets (at least 1) and forget every flowlet.
    void Resize(uint32_t entries);

    /**
     * @brief The packet of hash @p hash passes at @p nowPs.
     * @param hash the packet's ECMP hash
     * @param nowPs the current time, in ps
     * @param gapPs the flowlet timeout, in ps
     * @return the port of its ongoing flowlet (and the flowlet goes on), or -1 if a new flowlet starts:
     * the caller then picks a port and calls Start
     */
    int32_t Continue(uint64_t hash, int64_t nowPs, int64_t gapPs);

    /// A new flowlet of hash @p hash starts at @p nowPs on port @p port.
    void Start(uint64_t hash, int64_t nowPs, uint16_t port);

    /// @return flowlets started so far
    uint64_t GetFlowlets() const
    {
        return m_flowlets;
    }

  private:
    /// One bucket: the flowlet that used it last.
    struct Entry
    {
        uint64_t hash;   ///< full ECMP hash of its flow
        int64_t lastPs;  ///< time its last packet passed, in ps (-1: never used)
        uint16_t port;   ///< egress port of the flowlet
    };

    std::vector<Entry> m_entries; ///< buckets, indexed by hash mod size
    uint64_t m_flowlets{0};       ///< flowlets started
};

} // namespace ns3

#endif // COSIM_FLOWLET_TABLE_H

/**
 * @file
 * @ingroup cosim
 * Ingress accounting of a switch's shared packet buffer, and the PFC decisions it drives.
 */
#ifndef COSIM_SHARED_BUFFER_MMU_H
#define COSIM_SHARED_BUFFER_MMU_H

#include "fabric-packet.h"

#include "ns3/object.h"

#include <vector>

namespace ns3
{

/// Which part of the ingress buffer a packet occupies while it waits in a switch.
enum class BufferClass : uint8_t
{
    NONE = 0,     ///< not accounted (control frames)
    RESERVED = 1, ///< the (port, priority)'s guaranteed minimum
    SHARED = 2,   ///< the shared pool, under the dynamic threshold
    HEADROOM = 3, ///< the (port, priority)'s PFC headroom: what arrives after XOFF was sent
    DROP = 4,     ///< no room: the packet is dropped (counted)
    CREDIT = 5,   ///< an input-buffer lane covered by credits (InfiniBand; not the shared-buffer MMU)
};

/**
 * @ingroup cosim
 * @brief Shared-buffer memory management unit with per-(ingress port, priority) accounting.
 *
 * The buffer is split into a reserved part per (port, priority), a headroom per (port, priority) and a
 * shared pool (the rest). A (port, priority) may hold shared bytes up to the dynamic threshold
 * DynamicThresholdAlpha x (free shared bytes) (Choudhury & Hahne). With PFC, crossing the threshold or
 * entering headroom asks for XOFF; the pause is lifted (XON) once headroom is empty and shared use is
 * XonOffsetBytes below the threshold. Without PFC there is no headroom and excess packets are dropped.
 */
class SharedBufferMmu : public Object
{
  public:
    /// @return the TypeId of SharedBufferMmu
    static TypeId GetTypeId();

    SharedBufferMmu();
    ~SharedBufferMmu() override;

    /**
     * @brief Size the accounting for a switch.
     * @param headroomBytes PFC headroom of each port (same for its priorities), in bytes
     * @return false if reserved + headroom leave no shared pool
     */
    bool Setup(const std::vector<uint64_t>& headroomBytes, uint32_t maxPacketBytes);

    /// @return true if priority @p prio is lossless (PFC-protected, with headroom)
    bool IsLossless(uint8_t prio) const
    {
        return m_pfcEnabled && (m_losslessMask & (1u << prio));
    }

    /// Decide where a packet of @p bytes arriving on (@p port, @p prio) goes, and charge it there.
    BufferClass Admit(uint32_t port, uint8_t prio, uint32_t bytes);

    /// Free @p bytes charged to @p cls of (@p port, @p prio).
    void Release(uint32_t port, uint8_t prio, uint32_t bytes, BufferClass cls);

    /// @return true if (@p port, @p prio) should be paused now and is not yet (marks it paused)
    bool TakeXoff(uint32_t port, uint8_t prio);

    /// @return true if (@p port, @p prio) is paused and may resume now (marks it resumed)
    bool TakeXon(uint32_t port, uint8_t prio);

    /// @return true if (@p port, @p prio) is in the XOFF state
    bool IsXoff(uint32_t port, uint8_t prio) const
    {
        return m_use[Index(port, prio)].xoff;
    }

    /// @return whether PFC is enabled
    bool PfcEnabled() const
    {
        return m_pfcEnabled;
    }

    /// @return the current dynamic threshold on a (port, priority)'s shared use, in bytes
    double SharedThresholdBytes() const
    {
        return m_alpha * double(m_sharedPoolBytes - m_sharedUsedBytes);
    }

    /// @return headroom bytes in use at (@p port, @p prio)
    uint64_t GetHeadroomUsed(uint32_t port, uint8_t prio) const
    {
        return m_use[Index(port, prio)].headroomBytes;
    }

    /// @return the largest headroom use seen on any (port, priority), in bytes
    uint64_t GetPeakHeadroomUsed() const
    {
        return m_peakHeadroomUsed;
    }

    /// @return the size of the shared pool, in bytes
    uint64_t GetSharedPoolBytes() const
    {
        return m_sharedPoolBytes;
    }

    /// @return the configured headroom of @p port, in bytes (0 before Setup, e.g. on a credit fabric)
    uint64_t GetHeadroomBytes(uint32_t port) const
    {
        return port < m_headroomBytes.size() ? m_headroomBytes[port] : 0;
    }

  private:
    /// @return the flat index of (@p port, @p prio)
    static std::size_t Index(uint32_t port, uint8_t prio)
    {
        return std::size_t(port) * kNumPriorities + prio;
    }

    uint64_t m_bufferBytes{0};      ///< total packet buffer, in bytes
    uint64_t m_reservedBytes{0};    ///< guaranteed bytes per (port, priority)
    double m_alpha{0};              ///< dynamic-threshold factor (dimensionless)
    uint64_t m_xonOffsetBytes{0};   ///< XON hysteresis below the threshold, in bytes
    uint64_t m_xoffMarginBytes{0};  ///< XOFF when shared use is within this of the threshold, in bytes
    bool m_pfcEnabled{true};        ///< lossless with headroom and PAUSE, or lossy
    uint8_t m_losslessMask{0xff};   ///< bit p: priority p is lossless

    std::vector<uint64_t> m_headroomBytes;   ///< headroom per port, in bytes
    int64_t m_sharedPoolBytes{0};            ///< shared pool size, in bytes
    int64_t m_sharedUsedBytes{0};            ///< shared pool in use, in bytes
    /// What one (ingress port, priority) holds, side by side: a packet's admission, release and PAUSE
    /// decisions read one cache line, not one per column.
    struct Use
    {
        uint64_t reservedBytes; ///< in its reserved share, in bytes
        uint64_t sharedBytes;   ///< in the shared pool, in bytes
        uint64_t headroomBytes; ///< in its headroom, in bytes
        bool xoff;              ///< XOFF sent, XON not yet
    };

    std::vector<Use> m_use;                  ///< per (port, priority): Index(port, priority)
    uint64_t m_peakHeadroomUsed{0};          ///< high-water mark of any headroom use, in bytes
};

} // namespace ns3

#endif // COSIM_SHARED_BUFFER_MMU_H

/**
 * @file
 * @ingroup cosim
 * DCQCN notification point (Zhu et al., SIGCOMM 2015): the receiver's CNP pacing per flow.
 */
#ifndef COSIM_DCQCN_NOTIFICATION_POINT_H
#define COSIM_DCQCN_NOTIFICATION_POINT_H

#include <cstdint>
#include <unordered_map>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief DCQCN notification point of one NIC: ECN-marked data of a flow is answered with at most one CNP
 * per interval (the first marked packet of a flow always is).
 *
 * Plain state owned by the HostNic, whose CnpInterval attribute sets the interval.
 */
class DcqcnNotificationPoint
{
  public:
    /// Send at most one CNP per flow per @p intervalPs picoseconds.
    void SetIntervalPs(int64_t intervalPs)
    {
        m_intervalPs = intervalPs;
    }

    /// @return the minimum gap between two CNPs of a flow, in ps
    int64_t GetIntervalPs() const
    {
        return m_intervalPs;
    }

    /// An ECN-marked data packet of flow @p flowId arrived at @p nowPs (ps); @return true if a CNP is due
    bool OnMarked(uint64_t flowId, int64_t nowPs)
    {
        auto [it, fresh] = m_lastCnpPs.try_emplace(flowId, nowPs);
        if (!fresh && nowPs - it->second < m_intervalPs)
        {
            return false;
        }
        it->second = nowPs;
        return true;
    }

    /// Flow @p flowId delivered its last byte: drop its state.
    void Forget(uint64_t flowId)
    {
        m_lastCnpPs.erase(flowId);
    }

  private:
    int64_t m_intervalPs{0};                           ///< minimum gap between CNPs of a flow, in ps
    std::unordered_map<uint64_t, int64_t> m_lastCnpPs; ///< time of each flow's last CNP, in ps
};

} // namespace ns3

#endif // COSIM_DCQCN_NOTIFICATION_POINT_H

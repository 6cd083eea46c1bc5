/**
 * @file
 * @ingroup cosim
 * DCQCN notification point (Zhu et al., SIGCOMM 2015): the receiver's CNP pacing per flow.
 */
#ifndef COSIM_DCQCN_NOTIFICATION_POINT_H
#define COSIM_DCQCN_NOTIFICATION_POINT_H

#include <cstdint>
#include "flow-table.h"

namespace ns3
{

/**
 * @ingroup cosim
 * @brief DCQCN notification point of one NIC: ECN-marked data of a flow is answered with at most one CNP
 * per interval (the first marked packet of a flow always is).
 *
 * Owned by the HostNic, whose CnpInterval attribute sets the interval; each flow's last CNP time lives
 * in the run's FlowTable.
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

    /**
     * @brief An ECN-marked data packet of a flow arrived at @p nowPs (ps).
     * @param lastCnpPs the flow's last CNP time (FlowTable::lastCnpPs), in ps; set to @p nowPs if a CNP is due
     * @param nowPs the time now, in ps
     * @return true if a CNP is due
     */
    bool OnMarked(int64_t& lastCnpPs, int64_t nowPs) const
    {
        if (lastCnpPs != FlowTable::kNoCnp && nowPs - lastCnpPs < m_intervalPs)
        {
            return false;
        }
        lastCnpPs = nowPs;
        return true;
    }

    /// A flow delivered its last byte: forget its last CNP (@p lastCnpPs, FlowTable::lastCnpPs).
    static void Forget(int64_t& lastCnpPs)
    {
        lastCnpPs = FlowTable::kNoCnp;
    }

  private:
    int64_t m_intervalPs{0}; ///< minimum gap between CNPs of a flow, in ps
};

} // namespace ns3

#endif // COSIM_DCQCN_NOTIFICATION_POINT_H

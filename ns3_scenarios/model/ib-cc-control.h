/**
 * @file
 * @ingroup cosim
 * InfiniBand congestion control at the sender (IBA annex A10): BECNs raise a queue pair's index into the
 * congestion-control table (CCTI), a recovery timer walks it back down, and the table entry spaces packets.
 */
#ifndef COSIM_IB_CC_CONTROL_H
#define COSIM_IB_CC_CONTROL_H

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <algorithm>
#include <cstdint>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Congestion state of one queue pair under IB congestion control. Plain data; the NIC owns one per QP.
 */
struct IbCcState
{
    uint32_t ccti{0};          ///< index into the congestion-control table (dimensionless, 0 = no delay)
    bool timerRunning{false};  ///< the CCTI recovery timer is scheduled
};

/**
 * @ingroup cosim
 * @brief The IB congestion-control reaction and its parameters (one instance per NIC).
 *
 * On a BECN: CCTI <- min(CctiLimit, CCTI + CctiIncrease), and the recovery timer starts if idle. Every
 * CctiTimer period: CCTI <- CCTI - 1, until 0 (or the QP has sent everything). The table is linear: at
 * index i each packet waits i x CctGapStep after its own serialization before the QP's next one.
 */
class IbCcControl : public Object
{
  public:
    /// Attribute defaults, shared with the HostNic attributes of the same names that forward here.
    static constexpr uint32_t kDefaultCctiIncrease = 1;  ///< CctiIncrease (dimensionless)
    static constexpr uint32_t kDefaultCctiLimit = 127;   ///< CctiLimit (dimensionless)
    static constexpr int64_t kDefaultCctiTimerNs = 2000; ///< CctiTimer, in ns
    static constexpr int64_t kDefaultCctGapStepNs = 50;  ///< CctGapStep, in ns

    /// @return the TypeId of IbCcControl
    static TypeId GetTypeId();

    IbCcControl();
    ~IbCcControl() override;

    /// A BECN arrived for the QP in @p s; @return true if its recovery timer must be scheduled now
    bool OnBecn(IbCcState& s) const
    {
        s.ccti = std::min(m_cctiLimit, s.ccti + m_cctiIncrease);
        if (s.timerRunning)
        {
            return false;
        }
        s.timerRunning = true;
        return true;
    }

    /**
     * @brief The recovery timer of the QP in @p s fired: one step back down the table.
     * @param s the QP's state
     * @param done the QP has handed every byte to the port (its timer stops)
     * @return true if the timer must be scheduled again
     */
    bool OnRecoveryTimer(IbCcState& s, bool done) const
    {
        s.ccti = s.ccti > 0 ? s.ccti - 1 : 0;
        s.timerRunning = s.ccti > 0 && !done;
        return s.timerRunning;
    }

    /// @return the delay the table adds after each packet of the QP in @p s, in ps
    int64_t GapPs(const IbCcState& s) const
    {
        return int64_t(s.ccti) * m_cctGapStep.GetTimeStep();
    }

    /// @return the recovery period (one CCTI step back per period)
    Time GetRecoveryPeriod() const
    {
        return m_cctiTimer;
    }

  private:
    uint32_t m_cctiIncrease{kDefaultCctiIncrease}; ///< CCTI added per BECN (dimensionless)
    uint32_t m_cctiLimit{kDefaultCctiLimit};       ///< largest CCTI, the last table entry (dimensionless)
    Time m_cctiTimer;           ///< recovery period: one CCTI step back per period
    Time m_cctGapStep;          ///< injection delay per CCTI step (linear congestion-control table)
};

} // namespace ns3

#endif // COSIM_IB_CC_CONTROL_H

/**
 * @file
 * @ingroup cosim
 * DCQCN reaction point (Zhu et al., SIGCOMM 2015): the sender's per-queue-pair rate control.
 */
#ifndef COSIM_DCQCN_RATE_CONTROL_H
#define COSIM_DCQCN_RATE_CONTROL_H

#include "ns3/data-rate.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Rate state of one queue pair under DCQCN. Plain data; the NIC owns one per QP.
 */
struct DcqcnState
{
    double rateBps{0};        ///< current rate Rc, in bit/s
    double targetBps{0};      ///< target rate Rt, in bit/s
    double alpha{1};          ///< congestion estimate (dimensionless, 0..1)
    uint64_t bytesCounted{0}; ///< bytes sent since the last byte-counter stage, in bytes
    uint32_t timerStages{0};  ///< rate-increase timer expiries since the last CNP (T)
    uint32_t byteStages{0};   ///< byte-counter expiries since the last CNP (BC)
    bool cnpThisPeriod{false}; ///< a CNP arrived during the current alpha-update period
};

/**
 * @ingroup cosim
 * @brief The DCQCN reaction-point algorithm and its parameters (one instance per NIC).
 *
 * On a CNP: Rt <- Rc, Rc <- Rc (1 - alpha/2), alpha <- (1 - g) alpha + g, both stage counters reset.
 * Every AlphaUpdatePeriod without a CNP: alpha <- (1 - g) alpha. Every RateIncreasePeriod (timer) and
 * every ByteCounterBytes sent (byte counter), one increase stage: while both counters are below F, fast
 * recovery (Rc <- (Rt + Rc) / 2); once both exceed F, hyper increase (Rt += i R_HAI, i = min(T, BC) - F);
 * otherwise additive increase (Rt += R_AI); then Rc <- (Rt + Rc) / 2. Rates stay within
 * [MinRate, line rate].
 */
class DcqcnRateControl : public Object
{
  public:
    /// @return the TypeId of DcqcnRateControl
    static TypeId GetTypeId();

    DcqcnRateControl();
    ~DcqcnRateControl() override;

    /// @return the state of a new QP on a link of @p lineRateBps (starts at line rate)
    DcqcnState Initial(double lineRateBps) const;

    /// A CNP arrived for the QP in @p s.
    void OnCnp(DcqcnState& s) const;

    /// The alpha-update period of the QP in @p s ended.
    void OnAlphaTimer(DcqcnState& s) const;

    /// The rate-increase timer of the QP in @p s expired; @p lineRateBps caps the rates.
    void OnIncreaseTimer(DcqcnState& s, double lineRateBps) const;

    /// The QP in @p s sent @p bytes; @return true if the byte counter completed a stage (rate raised).
    bool OnBytesSent(DcqcnState& s, uint64_t bytes, double lineRateBps) const;

    /// @return true if the QP runs below line rate or target (its increase timer must run)
    bool IsThrottled(const DcqcnState& s, double lineRateBps) const
    {
        return s.rateBps < lineRateBps || s.targetBps < lineRateBps;
    }

    /// @return period of alpha updates
    Time GetAlphaUpdatePeriod() const
    {
        return m_alphaPeriod;
    }

    /// @return period of the rate-increase timer
    Time GetRateIncreasePeriod() const
    {
        return m_increasePeriod;
    }

  private:
    /// One increase stage (after a counter advanced).
    void Increase(DcqcnState& s, double lineRateBps) const;

    double m_g{1.0 / 256};          ///< EWMA gain g (dimensionless)
    double m_initialAlpha{1.0};     ///< alpha of a new QP (dimensionless)
    Time m_alphaPeriod;             ///< alpha-update period
    Time m_increasePeriod;          ///< rate-increase timer period
    uint64_t m_byteCounterBytes{0}; ///< bytes per byte-counter stage, in bytes
    uint32_t m_fastRecoverySteps{5}; ///< F
    DataRate m_rateAi;              ///< additive increase step R_AI
    DataRate m_rateHai;             ///< hyper increase step R_HAI
    DataRate m_minRate;             ///< floor of the current rate
};

} // namespace ns3

#endif // COSIM_DCQCN_RATE_CONTROL_H

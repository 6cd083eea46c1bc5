#include "model-probes.h"

#include "../engine/shared-codes.h"
#include "../helper/picosecond-resolution.h"
#include "../model/dcqcn-rate-control.h"
#include "../model/egress-port.h"
#include "../model/fabric-switch.h"
#include "../model/link-telemetry.h"
#include "../model/nscc-window.h"
#include "../model/pds-sack.h"
#include "../model/telemetry-rate-control.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/object-factory.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/make-event.h"
#include "ns3/scheduler.h"
#include "ns3/simulator-impl.h"
#include "ns3/simulator.h"

#include <sstream>
#include <stdexcept>

namespace cosim
{

using namespace ns3;

void
ModelProbes::NsccWindowAfter(double lineRateBps,
                             int64_t mtuBytes,
                             double delayAverageWeight,
                             int64_t n,
                             const int64_t* nowPs,
                             const int64_t* ackedBytes,
                             const int64_t* rttPs,
                             const uint8_t* ecn,
                             const uint8_t* nack,
                             double* cwndOut)
{
    EnsurePicosecondResolution();
    Ptr<NsccWindow> cc = CreateObject<NsccWindow>();
    cc->SetAttribute("DelayAverageWeight", DoubleValue(delayAverageWeight));
    NsccState s = cc->Initial(lineRateBps, static_cast<uint32_t>(mtuBytes));
    for (int64_t k = 0; k < n; ++k)
    {
        if (nack[k])
        {
            cc->OnNack(s, nowPs[k]);
        }
        else
        {
            cc->OnAck(s, uint64_t(ackedBytes[k]), ecn[k] ? uint64_t(ackedBytes[k]) : 0, rttPs[k], nowPs[k]);
        }
        cwndOut[k] = s.cwndBytes;
    }
}

void
ModelProbes::PdsSackFeedback(int64_t mtuBytes,
                             int64_t sent,
                             const uint16_t* entropies,
                             int64_t cackPsn,
                             int64_t sackPsn,
                             uint64_t bitmap,
                             int64_t ackPsn,
                             bool ecn,
                             int64_t nextCount,
                             int64_t* out)
{
    NS_ASSERT_MSG(ackPsn >= 0 && ackPsn < sent, "ACK_PSN " << ackPsn << " was not sent");
    const int64_t holdPs = 10'000'000;
    EntropySelector selector;
    selector.Configure(256, 32, holdPs);
    EntropyState entropy = selector.Initial(0);
    PdsScoreboard pds;
    pds.Configure(uint64_t(sent * mtuBytes), uint32_t(mtuBytes));
    for (int64_t i = 0; i < sent; ++i)
    {
        uint64_t index = 0;
        bool retransmission = false;
        pds.Next(&index, &retransmission);
        pds.OnSent(index, retransmission, 0, entropies[i]);
    }
    const PdsSack sack{uint64_t(cackPsn), sackPsn, bitmap, ackPsn, ecn, entropies[ackPsn]};
    const SackOutcome got = ApplySack(pds, selector, entropy, sack, 1);
    out[0] = int64_t(got.ackedBytes);
    out[1] = int64_t(got.markedBytes);
    for (int64_t k = 0; k < nextCount; ++k)
    {
        out[2 + k] = selector.Choose(entropy, 2);
    }
}

void
ModelProbes::LinkUtilizationAfter(double rateBps,
                                  int64_t n,
                                  const int64_t* nowPs,
                                  const int64_t* wireBytes,
                                  const int64_t* queueBytes,
                                  double* uOut,
                                  uint8_t* codeOut)
{
    EnsurePicosecondResolution();
    Ptr<LinkTelemetry> telemetry = CreateObject<LinkTelemetry>();
    telemetry->SetAttribute("Enabled", BooleanValue(true));
    telemetry->Configure(1);
    for (int64_t k = 0; k < n; ++k)
    {
        FabricPacket p{};
        p.kind = PacketKind::DATA;
        p.wireBytes = uint32_t(wireBytes[k]);
        telemetry->OnTransmit(&p, 0, uint64_t(queueBytes[k]), uint64_t(rateBps), nowPs[k]);
        uOut[k] = telemetry->GetUtilization(0);
        codeOut[k] = p.pathUtilization;
    }
}

double
ModelProbes::UtilizationCodeRoundTrip(double u)
{
    return UtilizationCode::Decode(UtilizationCode::Encode(u));
}

void
ModelProbes::TelemetryRateAfter(double lineRateBps,
                                int64_t n,
                                const uint8_t* code,
                                const int64_t* ackedBytes,
                                const int64_t* sentBytes,
                                double* rateOut)
{
    EnsurePicosecondResolution();
    Ptr<TelemetryRateControl> cc = CreateObject<TelemetryRateControl>();
    TelemetryCcState s = cc->Initial(lineRateBps);
    double rate = lineRateBps;
    for (int64_t k = 0; k < n; ++k)
    {
        rate = cc->OnAck(s, code[k], uint64_t(ackedBytes[k]), uint64_t(sentBytes[k]), lineRateBps, rate);
        rateOut[k] = rate;
    }
}

double
ModelProbes::EcnMarkFraction(double rateBps, int64_t queueBytes, int64_t trials, uint64_t seed)
{
    EnsurePicosecondResolution();
    RngSeedManager::SetSeed(static_cast<uint32_t>(seed % 4294967295ull) + 1);
    Ptr<FabricSwitch> sw = CreateObject<FabricSwitch>();
    Ptr<EgressPort> port = CreateObject<EgressPort>();
    port->SetDataRate(DataRate(uint64_t(rateBps)));
    sw->AddPort(port);
    sw->SetupBuffers(kDefaultMtuBytes + kDefaultHeaderBytes);
    sw->AssignStreams(0);
    int64_t marked = 0;
    for (int64_t i = 0; i < trials; ++i)
    {
        marked += sw->DecideMark(0, uint64_t(queueBytes)) ? 1 : 0;
    }
    sw->Dispose();
    return double(marked) / double(trials);
}

void
ModelProbes::DcqcnAfterCnp(double lineRateBps,
                           double rateBps,
                           double alpha,
                           int64_t steps,
                           int64_t bytesPerStep,
                           double* rateOut,
                           double* targetOut,
                           double* alphaOut)
{
    EnsurePicosecondResolution();
    Ptr<DcqcnRateControl> rp = CreateObject<DcqcnRateControl>();
    DcqcnState s = rp->Initial(lineRateBps);
    s.rateBps = rateBps;
    s.targetBps = rateBps;
    s.alpha = alpha;
    rp->OnCnp(s);
    rateOut[0] = s.rateBps;
    targetOut[0] = s.targetBps;
    alphaOut[0] = s.alpha;
    for (int64_t k = 1; k <= steps; ++k)
    {
        if (bytesPerStep > 0)
        {
            rp->OnBytesSent(s, uint64_t(bytesPerStep), lineRateBps);
        }
        rp->OnIncreaseTimer(s, lineRateBps);
        rp->OnAlphaTimer(s);
        rateOut[k] = s.rateBps;
        targetOut[k] = s.targetBps;
        alphaOut[k] = s.alpha;
    }
}

namespace
{
/// SimulatorCascade's state: the core under test, the generator, the events scheduled so far and the log.
struct Cascade
{
    Ptr<SimulatorImpl> sim;      ///< the core under test
    uint64_t rng;                ///< 64-bit LCG state
    int64_t budget;              ///< events it may still schedule
    std::vector<EventId> ids;    ///< every event scheduled, by tag
    std::vector<int64_t>* log;   ///< 6 numbers per event run

    uint64_t Next()
    {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        return rng >> 33;
    }

    void Run(int64_t tag);

    void Add()
    {
        if (budget <= 0)
        {
            return;
        }
        --budget;
        const int64_t tag = int64_t(ids.size());
        EventImpl* ev = MakeEvent(&Cascade::Run, this, tag);
        // delays from 0 to 60 us in steps of 1 ns, with ties: equal timestamps must keep insertion order
        const Time delay = NanoSeconds(int64_t(Next() % 4 == 0 ? 0 : Next() % 60000));
        switch (Next() % 4)
        {
        case 0:
            ids.push_back(sim->ScheduleNow(ev));
            break;
        case 1:
            sim->ScheduleWithContext(uint32_t(Next() % 7), delay, ev);
            ids.push_back(EventId());
            break;
        default:
            ids.push_back(sim->Schedule(delay, ev));
        }
    }
};

void
Cascade::Run(int64_t tag)
{
    const EventId& seen = ids[Next() % ids.size()];
    log->insert(log->end(), {tag, sim->Now().GetTimeStep(), int64_t(sim->GetContext()),
                             int64_t(sim->GetEventCount()), int64_t(sim->IsExpired(seen)),
                             sim->GetDelayLeft(seen).GetTimeStep()});
    const uint64_t action = Next() % 8;
    if (action == 0)
    {
        sim->Cancel(ids[Next() % ids.size()]);
    }
    else if (action == 1)
    {
        sim->Remove(ids[Next() % ids.size()]);
    }
    for (uint64_t k = Next() % 4; k > 0; --k)
    {
        Add();
    }
}
} // namespace

int64_t
ModelProbes::SimulatorCascade(const std::string& impl, uint64_t seed, int64_t events, int64_t* out)
{
    EnsurePicosecondResolution();
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe(impl, &tid) || !tid.IsChildOf(SimulatorImpl::GetTypeId()))
    {
        throw std::invalid_argument("'" + impl + "' is not an ns-3 simulator implementation");
    }
    ObjectFactory factory;
    factory.SetTypeId(tid);
    std::vector<int64_t> log;
    Cascade c{factory.Create<SimulatorImpl>(), seed, events, {}, &log};
    c.sim->SetScheduler(ObjectFactory("ns3::TimingWheelScheduler"));
    for (int k = 0; k < 8; ++k)
    {
        c.Add();
    }
    c.sim->Run();
    c.sim->Destroy();
    c.sim->Dispose();
    std::copy(log.begin(), log.end(), out);
    return int64_t(log.size() / 6);
}

int64_t
ModelProbes::SchedulerScript(const std::string& scheduler,
                             const uint8_t* step,
                             const uint64_t* ts,
                             const uint32_t* uid,
                             int64_t n,
                             int64_t* out)
{
    EnsurePicosecondResolution();
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe(scheduler.substr(0, scheduler.find('[')), &tid) ||
        !tid.IsChildOf(Scheduler::GetTypeId()))
    {
        throw std::invalid_argument("'" + scheduler + "' is not an ns-3 scheduler");
    }
    ObjectFactory factory;
    std::istringstream text(scheduler);
    text >> factory;
    Ptr<Scheduler> events = factory.Create<Scheduler>();
    int64_t pending = 0;
    for (int64_t i = 0; i < n; ++i)
    {
        Scheduler::Event ev{nullptr, {ts[i], uid[i], 0}};
        out[i] = -1;
        switch (step[i])
        {
        case kInsert:
            events->Insert(ev);
            ++pending;
            break;
        case kRemove:
            events->Remove(ev);
            --pending;
            break;
        case kRemoveNext:
        case kPeekNext:
            if (events->IsEmpty())
            {
                out[i] = -2;
                break;
            }
            out[i] = step[i] == kRemoveNext ? int64_t(events->RemoveNext().key.m_uid)
                                            : int64_t(events->PeekNext().key.m_uid);
            pending -= step[i] == kRemoveNext ? 1 : 0;
            break;
        default:
            throw std::invalid_argument("unknown scheduler step " + std::to_string(int(step[i])));
        }
    }
    return pending;
}

} // namespace cosim

package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/store"
)

// metrics are the server's Prometheus metrics, on a registry of its own.
// The tool label is a catalog tool name or "unknown", so that callers
// cannot grow the label set with made-up names.
type metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	limits  prometheus.Counter
	stalled prometheus.Counter
	handler http.Handler
}

func newMetrics(st Store) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "armory_calls_total", Help: "Tool calls through the pipeline, by tool and outcome status.",
	}, []string{"tool", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "armory_call_duration_seconds", Help: "Time from a call's arrival to its outcome (approval waits included), by tool.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12),
	}, []string{"tool"})
	m.limits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "armory_limits_reached_total", Help: "Calls refused because a session cap was reached.",
	})
	m.stalled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "armory_stalled_writes_total", Help: "Long responses (tool calls, MCP and event streams) cut because a write to the client did not finish within the write timeout (a client that stopped reading).",
	})
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "armory_pending_approvals", Help: "Open approval requests (pending or escalated), read from the store at scrape time.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n := 0
		for _, s := range []store.ApprovalStatus{store.StatusPending, store.StatusEscalated} {
			as, err := st.ListApprovals(ctx, store.ApprovalFilter{Status: s, Limit: store.MaxLimit})
			if err != nil {
				return -1
			}
			n += len(as)
		}
		return float64(n)
	})
	sandboxRuns := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "armory_sandbox_warm_runs_total", Help: "bwrap runs served by a sandbox set up ahead of the call (the warm pool; 0 when it is off).",
	}, func() float64 { return float64(sandbox.CurrentPoolStats().Warm) })
	sandboxCold := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "armory_sandbox_cold_runs_total", Help: "bwrap runs that found no warm sandbox ready and set up their own (warm pool on).",
	}, func() float64 { return float64(sandbox.CurrentPoolStats().Cold) })
	sandboxReady := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "armory_sandbox_warm_ready", Help: "Warm sandboxes set up and waiting for a call.",
	}, func() float64 { return float64(sandbox.CurrentPoolStats().Ready) })
	trailWriter := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "armory_audit_trail_writer", Help: "1 when this process writes the JSONL audit trail (a copy of the store's), 0 when another process holds it or it is refused (see the log), -1 when this process keeps none.",
	}, func() float64 {
		st, ok := trail.Current()
		switch {
		case !ok:
			return -1
		case st.Writer:
			return 1
		}
		return 0
	})
	trailBehind := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "armory_audit_trail_behind", Help: "Records of the store the JSONL audit trail does not hold yet, when this process writes it (-1 otherwise).",
	}, func() float64 {
		ts, ok := trail.Current()
		if !ok || !ts.Writer {
			return -1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h, err := st.AuditHead(ctx)
		if err != nil {
			return -1
		}
		return float64(max(0, h.Seq-ts.Written))
	})
	m.reg.MustRegister(m.calls, m.latency, m.limits, m.stalled, pending, sandboxRuns, sandboxCold, sandboxReady, trailWriter, trailBehind,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "armory_events_dropped_total",
		Help: "Events not relayed to the other replicas because the store's bounded event queue was full (delivery is best effort; the audit trail is complete).",
	}, func() float64 { return float64(st.EventsDropped()) }))
	for _, d := range []string{"durable", "relaxed"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "armory_audit_commits_total",
			Help:        "Group commits of the audit store, by durability: durable ones wait for stable storage (fsync), relaxed ones hold only start records of tools that cannot change anything (docs/storage.md).",
			ConstLabels: prometheus.Labels{"durability": d},
		}, func() float64 {
			c := st.CommitCounts()
			if d == "durable" {
				return float64(c.Durable)
			}
			return float64(c.Relaxed)
		}))
	}
	registerDurability(m.reg, st)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// observe records one call; known says whether tool is a tool of the
// calling agent (else it is counted as "unknown").
func (m *metrics) observe(known bool, tool, status string, d time.Duration) {
	if !known {
		tool = "unknown"
	}
	m.calls.WithLabelValues(tool, status).Inc()
	m.latency.WithLabelValues(tool).Observe(d.Seconds())
}

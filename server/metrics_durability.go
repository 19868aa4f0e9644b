package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/armory-dev/armory/store"
)

// registerDurability exports the audit store's durability mode, its
// background syncs and its durable point (docs/storage.md, "Durability
// modes").
func registerDurability(reg *prometheus.Registry, cc Store) {
	for _, mode := range []store.Durability{store.Strict, store.Batched} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "armory_audit_durability_mode",
			Help:        "1 for the audit store's durability mode (world-config.yaml durability:): strict waits for stable storage before a side-effecting call runs, batched makes commits durable within durability_window.",
			ConstLabels: prometheus.Labels{"mode": string(mode)},
		}, func() float64 {
			if cc.CommitCounts().Mode == mode {
				return 1
			}
			return 0
		}))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "armory_audit_syncs_total",
		Help: "Background syncs of a batched audit store, each making every commit before it durable.",
	}, func() float64 { return float64(cc.CommitCounts().Syncs) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "armory_audit_durable_seq",
		Help: "The highest audit seq this process committed that is known durable (on stable storage); the head minus this is what a power loss could drop.",
	}, func() float64 { return float64(cc.CommitCounts().DurableSeq) }))
}

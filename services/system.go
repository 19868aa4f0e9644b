package services

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	"golang.org/x/sys/unix"
)

// MaxThought bounds think's thought, in bytes.
const MaxThought = 16 << 10

// thinkTool is Agenthood's scratchpad: the agent writes down its reasoning.
// It has no side effect; like any call it is audited, so the reasoning is
// on the record.
func thinkTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "think",
			Description: "Think out loud: write down your reasoning, a plan or what you noticed. Nothing changes; the thought is kept in the audit trail.",
			InputSchema: schema([]string{"thought"}, prop("thought", str("Your reasoning (at most 16 KiB)."))),
		},
		man: armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{}},
		run: func(_ context.Context, c call) armory.Result {
			var a struct {
				Thought string `json:"thought"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			switch {
			case strings.TrimSpace(a.Thought) == "":
				return c.fail(armory.KindInvalid, "thought is empty; write what you are thinking")
			case len(a.Thought) > MaxThought:
				return c.fail(armory.KindTooLarge, "thought is %d bytes, more than the %d allowed; think in shorter steps", len(a.Thought), MaxThought)
			}
			return armory.OK("Noted (" + strconv.Itoa(utf8.RuneCountInString(a.Thought)) + " characters).")
		},
	}
}

// Usage is syscall.resource.usage's result.
type Usage struct {
	Host struct {
		CPUs      int        `json:"cpus"`
		Load      [3]float64 `json:"load"` // 1, 5 and 15 minute averages
		MemTotal  uint64     `json:"mem_total_bytes"`
		MemAvail  uint64     `json:"mem_available_bytes"`
		Uptime    int64      `json:"uptime_seconds"`
		DiskPath  string     `json:"disk_path"`
		DiskTotal uint64     `json:"disk_total_bytes"`
		DiskFree  uint64     `json:"disk_free_bytes"`
	} `json:"host"`
	Go struct {
		Version    string `json:"version"`
		Goroutines int    `json:"goroutines"`
		MaxProcs   int    `json:"gomaxprocs"`
		HeapAlloc  uint64 `json:"heap_alloc_bytes"`
		Sys        uint64 `json:"sys_bytes"`
		NumGC      uint32 `json:"num_gc"`
	} `json:"go"`
}

// resourceUsageTool reports the host's and the Go runtime's resources.
// The disk is the world folder's.
func (m *Module) resourceUsageTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.resource.usage",
			Description: "Host CPU (count, load), memory, disk of the world folder, and Go runtime stats of the Armory process.",
			InputSchema: armory.EmptyObjectSchema,
		},
		man: armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState}},
		run: func(_ context.Context, c call) armory.Result {
			if err := c.decode(&struct{}{}); err != nil {
				return armory.FailErr(err)
			}
			return jsonResult(m.usage())
		},
	}
}

func (m *Module) usage() Usage {
	var u Usage
	u.Host.CPUs = runtime.NumCPU()
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		for i := range 3 {
			u.Host.Load[i] = float64(si.Loads[i]) / (1 << unix.SI_LOAD_SHIFT)
		}
		u.Host.MemTotal = uint64(si.Totalram) * uint64(si.Unit)
		u.Host.MemAvail = uint64(si.Freeram) * uint64(si.Unit)
		u.Host.Uptime = int64(si.Uptime)
	}
	if avail, ok := memAvailable(); ok {
		u.Host.MemAvail = avail
	}
	u.Host.DiskPath = "."
	m.mu.Lock()
	if m.env.World != nil && m.env.World.Dir != "" {
		u.Host.DiskPath = m.env.World.Dir
	}
	m.mu.Unlock()
	var fs unix.Statfs_t
	if unix.Statfs(u.Host.DiskPath, &fs) == nil {
		u.Host.DiskTotal = fs.Blocks * uint64(fs.Bsize)
		u.Host.DiskFree = fs.Bavail * uint64(fs.Bsize)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u.Go.Version = runtime.Version()
	u.Go.Goroutines = runtime.NumGoroutine()
	u.Go.MaxProcs = runtime.GOMAXPROCS(0)
	u.Go.HeapAlloc, u.Go.Sys, u.Go.NumGC = ms.HeapAlloc, ms.Sys, ms.NumGC
	return u
}

// memAvailable reads MemAvailable from /proc/meminfo (free memory plus
// what the kernel can reclaim), which Sysinfo does not give.
func memAvailable() (uint64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

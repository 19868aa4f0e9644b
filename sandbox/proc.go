package sandbox

import (
	"os"
	"strconv"
	"strings"
)

// children returns the pids of the direct children of pid, read from
// /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN). A process that is gone
// has no children.
func children(pid int) []int {
	base := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(base + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// maxWalk bounds a tree walk so that a runaway tree cannot make the
// watchdog itself unbounded; anything at the bound is over every sane limit.
const maxWalk = 1 << 16

// descendants returns every live descendant of pid (not pid itself).
func descendants(pid int) []int {
	var out []int
	queue := children(pid)
	for len(queue) > 0 && len(out) < maxWalk {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children(p)...)
	}
	return out
}

// countTree counts the processes below root, plus root itself when self is
// set and root is alive. The count is a snapshot: processes forking during
// the walk may be missed or counted once more than they live.
func countTree(root int, self bool) int {
	n := len(descendants(root))
	if self {
		if _, err := os.Stat("/proc/" + strconv.Itoa(root)); err == nil {
			n++
		}
	}
	return n
}

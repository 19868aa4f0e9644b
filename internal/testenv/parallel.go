package testenv

import "sync"

// Parallel runs f(0) … f(n-1) at once, waits for all of them and returns
// their results in index order.
func Parallel[T any](n int, f func(i int) T) []T {
	out := make([]T, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = f(i) })
	}
	wg.Wait()
	return out
}

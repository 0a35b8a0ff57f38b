package workq

// SharedWeighed reports whether every claim loop of sharded Client c has
// read its backlog once (worker.Shared.Weighed), for the tests of package
// workq_test that measure the weighted shares, not the even ones before.
func SharedWeighed(c *Client) bool {
	return c.set != nil && c.set.shared.Weighed()
}

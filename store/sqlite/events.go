package sqlite

// Events (store.Events): a SQLite database has no channel between the
// processes that share its file, so this Store relays no events: every
// process streams its own (docs/storage.md, "Events between replicas").

// PublishEvent sends nothing and returns false.
func (s *Store) PublishEvent([]byte) bool { return false }

// SubscribeEvents never calls fn; cancel does nothing.
func (s *Store) SubscribeEvents(func([]byte)) (cancel func()) { return func() {} }

// EventsDropped is 0: PublishEvent queues nothing.
func (s *Store) EventsDropped() int64 { return 0 }

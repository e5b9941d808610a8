package childproc

import "sync"

// An outbox is the one writer of one side of the supervisor's socket: its
// goroutine sends queued messages in order. Posting never blocks, so the
// side's reader, and code holding a lock, may post: a socket holds few
// datagrams (net.unix.max_dgram_qlen), and a reader blocked in a send while
// the other side's reader is blocked in one too would stop both for good.
// The queue is unbounded; what bounds it is the other side, which reads
// without ever blocking on a send itself.
type outbox struct {
	write func(b, oob []byte) error
	wake  chan struct{} // capacity 1: the queue changed
	done  chan struct{} // closed when the goroutine has returned

	mu     sync.Mutex
	queue  []outMsg
	closed error // once set, what every later or unsent message gets
}

type outMsg struct {
	b, oob []byte
	sent   func(error) // nil, or told how the send went (from the outbox's goroutine)
}

// newOutbox starts the writer; its owner must close it.
func newOutbox(write func(b, oob []byte) error) *outbox {
	o := &outbox{write: write, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go o.run()
	return o
}

// post queues a message; sent, if not nil, learns how its send went.
func (o *outbox) post(b, oob []byte, sent func(error)) {
	o.mu.Lock()
	if err := o.closed; err != nil {
		o.mu.Unlock()
		if sent != nil {
			sent(err)
		}
		return
	}
	o.queue = append(o.queue, outMsg{b, oob, sent})
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// close stops the writer once its current send returns, fails what is still
// queued with err, and waits for the goroutine.
func (o *outbox) close(err error) {
	o.mu.Lock()
	if o.closed == nil {
		o.closed = err
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	<-o.done
}

func (o *outbox) run() {
	defer close(o.done)
	for range o.wake {
		for {
			o.mu.Lock()
			if err := o.closed; err != nil {
				q := o.queue
				o.queue = nil
				o.mu.Unlock()
				for _, m := range q {
					if m.sent != nil {
						m.sent(err)
					}
				}
				return
			}
			if len(o.queue) == 0 {
				o.mu.Unlock()
				break
			}
			m := o.queue[0]
			o.queue[0] = outMsg{}
			o.queue = o.queue[1:]
			o.mu.Unlock()
			err := o.write(m.b, m.oob)
			if m.sent != nil {
				m.sent(err)
			}
		}
	}
}

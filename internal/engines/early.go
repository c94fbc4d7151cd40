package engines

import (
	"context"

	"github.com/git-sandbox/git-sandbox/container"
)

// Early is the environment's engine (""), reached in the background from
// the start of a command that will ask it, so that its round trips
// overlap the command's other work.
type Early struct {
	done chan struct{}
	eng  container.Engine
	err  error
}

// ConnectEarly starts reaching the environment's engine. It is named by
// DOCKER_HOST and the like, not by a config.
func ConnectEarly(ctx context.Context) *Early {
	e := &Early{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.eng, e.err = Connect(ctx, nil, "")
	}()
	return e
}

// Connector answers the environment's engine from e and any other
// through others.
func (e *Early) Connector(others func(ctx context.Context, name string) (container.Engine, error)) func(ctx context.Context, name string) (container.Engine, error) {
	return func(ctx context.Context, name string) (container.Engine, error) {
		if name != "" {
			return others(ctx, name)
		}
		<-e.done
		return e.eng, e.err
	}
}

// Discard closes the connection, unused, once it is made (without
// waiting for it).
func (e *Early) Discard() {
	go func() {
		<-e.done
		if e.eng != nil {
			e.eng.Close()
		}
	}()
}

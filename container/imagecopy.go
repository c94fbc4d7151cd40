package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/docker/client"
)

// SaveImage streams an image as `docker save` writes it; the caller closes
// the stream.
func (d *Docker) SaveImage(ctx context.Context, ref string) (io.ReadCloser, error) {
	r, err := d.api.ImageSave(ctx, []string{ref})
	if err != nil {
		return nil, fmt.Errorf("save image %s: %w", ref, sdkErr(err))
	}
	return r, nil
}

// LoadImage loads an image stream `docker save` wrote.
func (d *Docker) LoadImage(ctx context.Context, r io.Reader) error {
	resp, err := d.api.ImageLoad(ctx, r, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load image: %w", sdkErr(err))
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("load image: %w", err)
		}
		if msg.Error != "" {
			return fmt.Errorf("load image: %s", msg.Error)
		}
	}
}

package groundwire_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/metadata"

	groundwire "github.com/groundwire/groundwire/clients/go"
)

// Runs without a server: WithAPIKey refuses keys that would make a malformed
// authorization header instead of sending them.
func TestWithAPIKeyRefusesMalformedKeys(t *testing.T) {
	base := context.Background()
	for _, key := range []string{"", " ", "gw_a b", "gw_a\tb", "gw_a\nb", "gw_\x7f", " gw_x"} {
		ctx, err := groundwire.WithAPIKey(base, key)
		if !errors.Is(err, groundwire.ErrInvalidAPIKey) {
			t.Fatalf("WithAPIKey(%q): err = %v, want ErrInvalidAPIKey", key, err)
		}
		if _, ok := metadata.FromOutgoingContext(ctx); ok {
			t.Fatalf("WithAPIKey(%q) attached metadata", key)
		}
	}
	ctx, err := groundwire.WithAPIKey(base, "gw_valid-Key_123")
	if err != nil {
		t.Fatal(err)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer gw_valid-Key_123" {
		t.Fatalf("authorization = %v", got)
	}
}

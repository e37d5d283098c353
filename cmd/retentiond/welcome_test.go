package main

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDevWelcomeLinksTheConsoleWithTheTokenInTheFragment(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, printDevWelcome(&out, "welcome-test-secret-of-at-least-32-bytes", "http://127.0.0.1:8080", "ACME00000000000000000001@AdobeOrg", nil, nil))
	token := regexp.MustCompile(`export TOKEN=(\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, token, out.String())
	require.Contains(t, out.String(), "Web console: http://127.0.0.1:8080/ui/#token="+token[1]+"\n",
		"the token rides in the fragment, which no server or log sees")
}

package main

import (
	"flag"

	"github.com/acme/retention/catalog"
	"github.com/acme/retention/internal/demo"
)

// The CLI's defaults, in one place: a command run with no -org acts in the first demo org, the one `make run`
// loads and `retentionctl token` signs for, in the org's default sandbox.
var (
	defaultOrg     = demo.Orgs[0]
	defaultSandbox = catalog.DefaultSandbox
)

// tenantFlags registers -org and -sandbox, the tenant every API command acts in, with the CLI's defaults.
func tenantFlags(fs *flag.FlagSet) (org, sandbox *string) {
	org = fs.String("org", defaultOrg, "the org (x-gw-ims-org-id)")
	sandbox = fs.String("sandbox", defaultSandbox, "the sandbox (x-sandbox-name)")
	return org, sandbox
}

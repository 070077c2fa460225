package deps

import (
	_ "github.com/cenkalti/backoff/v5"
	_ "github.com/getkin/kin-openapi/openapi3"
	_ "github.com/goccy/go-yaml"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/go-github/v92/github"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/ollama/ollama/api"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/openai/openai-go/v3/option"
	_ "gitlab.com/gitlab-org/api/client-go/v2"
	_ "gopkg.in/natefinch/lumberjack.v2"
	_ "modernc.org/sqlite"
)

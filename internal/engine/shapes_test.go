package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/ollama"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// shape is a reply as real local models write it through Ollama, LM Studio,
// vLLM and llama.cpp servers, recorded with where it is documented. The
// tool and the arguments are the test server's (test/echo, {"text": "hi"});
// the shape around them is the documented one.
type shape struct {
	name, source string
	native       bool          // native tool calls are on (tools are sent)
	reply        llmtest.Reply // what the server answers
	raw          string        // or a raw OpenAI body (OpenAI wire only)
	openaiOnly   bool          // the shape exists on the OpenAI wire only
	// The intended calls ("server/tool {args}"), in order, and whether
	// the next message tells the model how to reply next time; or, when
	// the intent is not clear, a part of the correction sent back.
	calls      []string
	hint       bool
	correction string
	// comment, when set, is the comment the calls go with; silent says
	// they go with none.
	comment string
	silent  bool
}

const (
	echoHi   = `test/echo {"text":"hi"}`
	echoTwo  = `test/echo {"text":"two"}`
	sleepOne = `test/sleep {"ms":1}`
	pidCall  = `test/pid {}`
	command  = `{"comment": "Echoing.", "command": {"tool": "test/echo", "args": {"text": "hi"}}}`
	// qwenXML is Qwen3-Coder's (and Qwen3.5's) call of echo, as its chat
	// template writes it, without the <tool_call> around it.
	qwenXML = "<function=echo>\n<parameter=text>\nhi\n</parameter>\n</function>"
)

var shapes = []shape{
	{name: "think block before the answer", source: "lmstudio-ai/lmstudio-bug-tracker#1569 (<think>…</think> inside content)",
		reply: llmtest.Reply{Content: "<think>\nThe user wants an echo. I will call echo.\n</think>\n\n" + command},
		calls: []string{echoHi}},
	{name: "closing think tag only", source: "ggml-org/llama.cpp#11861, ollama/ollama#11521 (the opening <think> is in the template)",
		reply: llmtest.Reply{Content: "The user wants an echo.\n</think>\n\n" + command},
		calls: []string{echoHi}},
	{name: "separate reasoning field", source: "https://docs.vllm.ai/en/v0.10.0/features/reasoning_outputs.html (reasoning_content); https://docs.ollama.com/capabilities/thinking (message.thinking)",
		reply: llmtest.Reply{Content: command, Reasoning: `I could answer {"done": true, "comment": "secret"} but should echo.`},
		calls: []string{echoHi}},
	{name: "reasoning field of newer vLLM", source: "https://docs.vllm.ai/en/stable/features/reasoning_outputs/ (reasoning, formerly reasoning_content)",
		reply:      llmtest.Reply{Content: command, Reasoning: "I should echo; secret thoughts.", ReasoningField: "reasoning"},
		openaiOnly: true, calls: []string{echoHi}},
	{name: "JSON in a code fence with prose around", source: "ollama/ollama#13519 (JSON in a code block in content)",
		reply: llmtest.Reply{Content: "I'll echo it now.\n```json\n" + command + "\n```\nLet me know if you need more."},
		calls: []string{echoHi}},
	{name: "Qwen <tool_call> in content", source: "ollama/ollama#11381 (qwen3 <tool_call> of a name not in the tool list is not parsed); ollama/ollama#17284 (left as content)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"hi\"}}\n</tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "Qwen <tool_call> without native tools", source: "sgomez/ollama-ai-provider#26 (qwen2:7b through Ollama answers with <tool_call> text)",
		reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"test__echo\", \"arguments\": {\"text\": \"hi\"}}\n</tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "bare name/arguments object", source: "ollama/ollama#11185 (qwen3:32b: the call as content)",
		native: true, reply: llmtest.Reply{Content: `{"name": "echo", "arguments": {"text": "hi"}}`},
		calls: []string{echoHi}, hint: true},
	{name: "Llama name/parameters object in a fence", source: "ollama/ollama#13519 (llama3.2:3b: JSON call in a code block in content)",
		native: true, reply: llmtest.Reply{Content: "```json\n{\"name\": \"echo\", \"parameters\": {\"text\": \"hi\"}}\n```"},
		calls: []string{echoHi}, hint: true},
	{name: "type/name/parameters object with prose after", source: "vllm-project/vllm#19024 (Llama JSON call followed by plain text); vllm-project/vllm#46863",
		native: true, reply: llmtest.Reply{Content: "{\"type\": \"function\", \"name\": \"echo\", \"parameters\": {\"text\": \"hi\"}}\n\nWould you like anything else?"},
		calls: []string{echoHi}, hint: true},
	{name: "type/function wrapper object", source: "vllm-project/vllm#11786 (llama3.2 content holds the call, tool_calls empty)",
		native: true, reply: llmtest.Reply{Content: `{"type": "function", "function": {"name": "echo", "parameters": {"text": "hi"}}}`},
		calls: []string{echoHi}, hint: true},
	{name: "Llama <|python_tag|>", source: "meta-llama/llama-models#266 (Llama 3.1 JSON tool calls after <|python_tag|>)",
		native: true, reply: llmtest.Reply{Content: `<|python_tag|>{"type": "function", "name": "echo", "parameters": {"text": "hi"}}<|eom_id|>`},
		calls: []string{echoHi}, hint: true},
	{name: "Llama 4 <|python_start|>", source: "vllm-project/vllm#16214 (<|python_start|>{\"name\", \"parameters\"}<|python_end|> as content)",
		native: true, reply: llmtest.Reply{Content: `<|python_start|>{"name": "echo", "parameters": {"text": "hi"}}<|python_end|>`},
		calls: []string{echoHi}, hint: true},
	{name: "calls separated by semicolons", source: "lemonade-sdk/lemonade#1562 (llama-server: Llama 3.2 writes \"; {…}; {…}\"); abetlen/llama-cpp-python#1856",
		native: true, reply: llmtest.Reply{Content: `{"name": "echo", "parameters": {"text": "hi"}}; {"name": "echo", "parameters": {"text": "two"}}`},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "two objects in one reply", source: "sgomez/ollama-ai-provider#11 (two {\"name\", \"arguments\"} objects in one Ollama reply); NousResearch/hermes-agent#87900",
		native: true, reply: llmtest.Reply{Content: "{\n  \"name\": \"echo\",\n  \"arguments\": {\"text\": \"hi\"}\n} {\n  \"name\": \"echo\",\n  \"arguments\": {\"text\": \"two\"}\n}"},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "Harmony call as content", source: "lmstudio-ai/lmstudio-bug-tracker#942 (gpt-oss Harmony call left in the output)",
		native: true, reply: llmtest.Reply{Content: `<|start|>assistant<|channel|>commentary to=functions.test__echo<|constrain|>json<|message|>{"text":"hi"}`},
		calls: []string{echoHi}, hint: true},
	{name: "Harmony with analysis and <|call|>", source: "ggml-org/llama.cpp#15181 (unparsed Harmony calls stay verbatim in content); header as in ai-dynamo/dynamo#2999",
		native: true, reply: llmtest.Reply{Content: "<|channel|>analysis<|message|>Need to echo.<|end|><|start|>assistant<|channel|>commentary to=functions.test__echo <|constrain|>json<|message|>{\"text\":\"hi\"}<|call|>"},
		calls: []string{echoHi}, hint: true},
	{name: "native call plus another in content", source: "ggml-org/llama.cpp#14101 (the first call is parsed, the others stay in content)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"two\"}}\n</tool_call>",
			ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "hi"}}}},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "native arguments as a JSON string", source: "ollama/ollama#12413 (models send arguments as a serialized string); vllm-project/vllm#54964",
		native: true, openaiOnly: true,
		reply: llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "test__echo", Args: json.RawMessage(`"{\"text\": \"hi\"}"`)}}},
		calls: []string{echoHi}},
	{name: "string arguments inside <tool_call>", source: "vllm-project/vllm#54964 (Granite 4 writes \"arguments\" as a string)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>{\"name\": \"echo\", \"arguments\": \"{\\n  \\\"text\\\": \\\"hi\\\"\\n}\"}</tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "native arguments as an object", source: "ggml-org/llama.cpp#20198 (llama-server returns arguments as a JSON object)",
		native: true, openaiOnly: true,
		raw: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
			"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"test__echo","arguments":{"text":"hi"}}}]}}]}`,
		calls: []string{echoHi}},
	{name: "native call without the server prefix", source: "NousResearch/hermes-agent#61336 (models drop the MCP server prefix of tool names)",
		native: true, reply: llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "echo", Args: map[string]string{"text": "hi"}}}},
		calls: []string{echoHi}, hint: true},
	{name: "command without the server prefix", source: "NousResearch/hermes-agent#61336 (models drop the MCP server prefix of tool names)",
		reply: llmtest.Reply{Content: `{"comment": "Echoing.", "command": {"tool": "echo", "args": {"text": "hi"}}}`},
		calls: []string{echoHi}, hint: true},
	{name: "call of a tool not in the list", source: "ollama/ollama#11381 (a call of a tool that is not offered)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n{\"name\": \"create\", \"arguments\": {\"title\": \"test1\"}}\n</tool_call>"},
		correction: `there is no tool "create"`},
	{name: "empty reply cut by the length limit", source: "ollama/ollama#16184 (done_reason length: thinking, no content)",
		reply:      llmtest.Reply{Reasoning: "Thinking and thinking about the echo", FinishReason: "length"},
		correction: "cut off at the output token limit"},

	// Qwen3-Coder, Qwen3.5 and Qwen3.6: XML-style calls.
	{name: "Qwen3-Coder XML call in content", source: "QwenLM/Qwen3-Coder chat template (<tool_call>\\n<function=…>\\n<parameter=…>); ollama/ollama#12751 (qwen3-coder: the <function=…> call left in content)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n" + qwenXML + "\n</tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "Qwen3-Coder XML without its opening tag", source: "ollama/ollama#16686 (via #16693) and ollama/ollama#18530 (prose, then <function=…> with only the closing </tool_call>)",
		native: true, reply: llmtest.Reply{Content: "I'll echo it now.\n\n" + qwenXML + "\n</tool_call>"},
		comment: "I'll echo it now.", calls: []string{echoHi}, hint: true},
	{name: "Qwen3-Coder XML without either tag", source: "QwenLM/Qwen3-Coder#475 (the model leaves out the initial <tool_call>); ml-explore/mlx-lm#1616 (unwrapped <function=…> in content)",
		reply: llmtest.Reply{Content: qwenXML},
		calls: []string{echoHi}, hint: true},
	{name: "Qwen3.5 XML call with a typed parameter", source: "NotPunchnox/rkllama#168 (Qwen3.5 XML calls in content); vllm-project/vllm#23099 (parameter values converted to the schema's type)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n<function=sleep>\n<parameter=ms>\n1\n</parameter>\n</function>\n</tool_call>"},
		calls: []string{sleepOne}, hint: true},
	{name: "Qwen3.6 XML calls, two in a row", source: "TheTom/llama-cpp-turboquant#199 (Qwen3.6 XML calls not parsed by llama-server); ollama/ollama#12751 (several calls)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n" + qwenXML + "\n</tool_call>\n<tool_call>\n" + strings.Replace(qwenXML, "hi", "two", 1) + "\n</tool_call>"},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "Qwen XML call without </function>", source: "ollama/ollama#17742 (a bare call that never closes is no call); NotPunchnox/rkllama#168 (calls cut at max_tokens)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>\n<function=echo>\n<parameter=text>\nhi\n</parameter>\n"},
		correction: "no closing </function>"},
	{name: "Qwen XML call of a tool not in the list", source: "ollama/ollama#17742 (a bare call naming a tool that is not registered)",
		native: true, reply: llmtest.Reply{Content: "<function=create>\n<parameter=title>\ntest1\n</parameter>\n</function>"},
		correction: `there is no tool "create"`},
	{name: "XML parameter that cannot be its schema's type", source: "ml-explore/mlx-lm#1616 (a value that is no literal of the parameter's type); vllm-project/vllm#23099",
		native: true, reply: llmtest.Reply{Content: "<function=sleep>\n<parameter=ms>\nsoon\n</parameter>\n</function>"},
		correction: "which is not integer"},

	// GLM-4.5 to 4.7.
	{name: "GLM-4.5 <arg_key>/<arg_value> in content", source: "ikawrakow/ik_llama.cpp discussion #753 (GLM-4.5-Air: \"<tool_call>ls <arg_key>dirPath</arg_key> <arg_value>backend</arg_value> </tool_call>\" as content)",
		native: true, reply: llmtest.Reply{Content: "Let me echo it: <tool_call>echo <arg_key>text</arg_key> <arg_value>hi</arg_value> </tool_call>"},
		comment: "Let me echo it:", calls: []string{echoHi}, hint: true},
	{name: "GLM-4.7 arguments right after the name", source: "vllm-project/vllm#37386 (GLM-4.7 inline arguments, no newline after the name; #37277)",
		reply: llmtest.Reply{Content: "<tool_call>echo<arg_key>text</arg_key><arg_value>hi</arg_value></tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "GLM call without arguments", source: "osaurus-ai/vmlx-swift#228 (GLM writes a call without arguments as <tool_call>NAME</tool_call>)",
		native: true, reply: llmtest.Reply{Content: "<tool_call>pid</tool_call>"},
		calls: []string{pidCall}, hint: true},

	// DeepSeek V3, R1 and V3.1.
	{name: "DeepSeek V3/R1 special tokens in content", source: "vllm-project/vllm#23454 (the V3/R1 format: function<｜tool▁sep｜>NAME and a json fence); deepseek-ai/DeepSeek-V3#944 (calls not parsed when served by vLLM)",
		native: true, reply: llmtest.Reply{Content: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>test__echo\n```json\n{\"text\": \"hi\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"},
		silent: true, calls: []string{echoHi}, hint: true},
	{name: "DeepSeek V3.1 calls in content", source: "vllm-project/vllm#23454 and sgl-project/sglang#9446 (the V3.1 format: NAME<｜tool▁sep｜>{…})",
		reply: llmtest.Reply{Content: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>echo<｜tool▁sep｜>{\"text\": \"hi\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>echo<｜tool▁sep｜>{\"text\": \"two\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "DeepSeek R1 distill's spelling of the tokens", source: "ggml-org/llama.cpp common/chat.cpp (the R1 distills write <｜tool calls begin｜> and other spellings; their template spells the tokens with spaces)",
		native: true, reply: llmtest.Reply{Content: "<｜tool calls begin｜><｜tool call begin｜>function<｜tool sep｜>echo\n```json\n{\"text\": \"hi\"}\n```<｜tool call end｜><｜tool calls end｜>"},
		calls: []string{echoHi}, hint: true},

	// Mistral, Devstral, Magistral.
	{name: "Mistral [TOOL_CALLS] JSON list", source: "ml-explore/mlx-lm#1374 (Ministral-8B writes [TOOL_CALLS] [{\"name\": …, \"arguments\": …}])",
		native: true, reply: llmtest.Reply{Content: `[TOOL_CALLS] [{"name": "echo", "arguments": {"text": "hi"}}]`},
		calls: []string{echoHi}, hint: true},
	{name: "Devstral [TOOL_CALLS]NAME[ARGS]", source: "anomalyco/opencode#856 (Devstral through LM Studio: [TOOL_CALLS]bash[ARGS]{…} in the reply)",
		native: true, reply: llmtest.Reply{Content: `[TOOL_CALLS]echo[ARGS]{"text": "hi"}`},
		calls: []string{echoHi}, hint: true},
	{name: "Magistral calls with [CALL_ID], two in a row", source: "mistralai/mistral-common (the v11 tokenizer's [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{…}); vllm-project/vllm#44596 (9-character ids)",
		reply:  llmtest.Reply{Content: `[TOOL_CALLS]test__echo[CALL_ID]a1b2c3d4e[ARGS]{"text":"hi"}[TOOL_CALLS]test__echo[CALL_ID]f5g6h7i8j[ARGS]{"text":"two"}</s>`},
		silent: true, calls: []string{echoHi, echoTwo}, hint: true},

	// Kimi K2, MiniMax M2, pythonic lists, a Hermes call without its tag.
	{name: "Kimi K2 section tokens in content", source: "MoonshotAI/Kimi-K2 docs/tool_call_guidance.md (parsing the call tokens when the server does not); ikawrakow/ik_llama.cpp#955 (Kimi calls shown as text)",
		native: true, reply: llmtest.Reply{Content: "<|tool_calls_section_begin|><|tool_call_begin|>functions.test__echo:0<|tool_call_argument_begin|>{\"text\": \"hi\"}<|tool_call_end|><|tool_calls_section_end|>"},
		calls: []string{echoHi}, hint: true},
	{name: "MiniMax M2 <minimax:tool_call> in content", source: "MiniMax-AI/MiniMax-M2.5#10 (the <minimax:tool_call><invoke name=…> block returned as text)",
		native: true, reply: llmtest.Reply{Content: "<minimax:tool_call>\n  <invoke name=\"echo\">\n    <parameter name=\"text\">hi</parameter>\n  </invoke>\n</minimax:tool_call>"},
		calls: []string{echoHi}, hint: true},
	{name: "pythonic call list", source: "vllm-project/vllm#22917 (Llama 4: [get_todays_date(), get_weather(location=…)]); vllm-project/vllm#30722 (the list left in content)",
		native: true, reply: llmtest.Reply{Content: `[echo(text="hi"), echo(text='two')]`},
		calls: []string{echoHi, echoTwo}, hint: true},
	{name: "pythonic list with an argument that is no literal", source: "vllm-project/vllm#30722 (lists the parser cannot read as literals)",
		native: true, reply: llmtest.Reply{Content: `[echo(text=user_input)]`},
		correction: "no JSON object"},
	{name: "Hermes call without its opening tag", source: "NousResearch/hermes-agent#35129 (qwen2.5 on Ollama drops <tool_call> and writes only the closing tag)",
		native: true, reply: llmtest.Reply{Content: "{\"name\": \"echo\", \"arguments\": {\"text\": \"hi\"}}\n</tool_call>"},
		calls: []string{echoHi}, hint: true},

	// Native calls with markup left in the content.
	{name: "native call with </tool_call> left in content", source: "Rose22/openlumara#91 (vLLM's qwen3_coder parser leaks \\n</tool_call> into content beside the parsed call)",
		native: true, reply: llmtest.Reply{Content: ">\n</tool_call>", ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "hi"}}}},
		silent: true, calls: []string{echoHi}},
	{name: "native call with end tokens after the prose", source: "Rose22/openlumara#91 (the wrapper's closing tags in content after the tool calls)",
		native: true, reply: llmtest.Reply{Content: "Echoing it now.<|im_end|>\n</function>\n</tool_call>", ToolCalls: []llmtest.Call{{Name: "test__echo", Args: map[string]string{"text": "hi"}}}},
		comment: "Echoing it now.", calls: []string{echoHi}},

	// The answer only in the reasoning field.
	{name: "answer only in reasoning_content", source: "QwenLM/Qwen3#1297 (content None, the whole answer in reasoning_content); xorbitsai/inference#3673",
		reply:   llmtest.Reply{Reasoning: "The user wants hi echoed, a secret plan.\n\n" + command},
		comment: "Echoing.", calls: []string{echoHi}},
	{name: "answer only in reasoning_content, content null", source: "vllm-project/vllm#17609 (content null, the reply in reasoning_content)",
		raw: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",
			"message":{"role":"assistant","content":null,"reasoning_content":` + strconv.Quote("secret thoughts\n"+command) + `}}]}`,
		calls: []string{echoHi}},
	{name: "answer only in vLLM's reasoning field", source: "vllm-project/vllm#37558 (Qwen3.5 on vLLM: reasoning field, content empty); https://docs.vllm.ai/en/stable/features/reasoning_outputs/",
		reply:      llmtest.Reply{Reasoning: "secret: echo it.\n```json\n" + command + "\n```", ReasoningField: "reasoning"},
		openaiOnly: true, calls: []string{echoHi}},
	{name: "Qwen XML call in reasoning_content, content empty", source: "QwenLM/qwen-code#3730 (content \"\", tool_calls null, reasoning_content ending in <tool_call><function=edit>…)",
		native: true, reply: llmtest.Reply{Reasoning: "Analysis: the user wants an echo, secret.\n<tool_call>\n" + qwenXML + "\n</tool_call>"},
		silent: true, calls: []string{echoHi}, hint: true},
	{name: "Qwen XML call in reasoning, prose after </think> in content", source: "vllm-project/vllm#39056 and #39055 (Qwen3.5 writes the call inside <think>; text after </think> becomes the content)",
		native: true, reply: llmtest.Reply{Content: "I will echo hi now.", Reasoning: "secret reasoning\n<tool_call>\n" + qwenXML + "\n</tool_call>\n"},
		silent: true, calls: []string{echoHi}, hint: true},
	{name: "Kimi call tokens in the reasoning", source: "MoonshotAI/Kimi-K2#89 (<|tool_calls_section_begin|> inside the reasoning stream)",
		native: true, reply: llmtest.Reply{Reasoning: "I need to echo, secret.<|tool_calls_section_begin|><|tool_call_begin|>functions.test__echo:0<|tool_call_argument_begin|>{\"text\":\"hi\"}<|tool_call_end|><|tool_calls_section_end|>"},
		silent: true, calls: []string{echoHi}, hint: true},
	{name: "call syntax named in reasoning prose only", source: "lmstudio-ai/lmstudio-bug-tracker#1592 (reasoning that mentions <function=…> and <tool_call> is no call)",
		native: true, reply: llmtest.Reply{Reasoning: "Some models write <function=echo> tags, others <tool_call>; a secret. I have nothing to call yet."},
		correction: "the reply was empty"},
	{name: "a draft call inside reasoning prose", source: "lmstudio-ai/lmstudio-bug-tracker#1592 (reasoning about calls is not a call)",
		native: true, reply: llmtest.Reply{Reasoning: `I could call <tool_call>{"name": "echo", "arguments": {"text": "secret"}}</tool_call> but I should think more first.`},
		correction: "the reply was empty"},
}

// callMarkers are the families' markup, none of which may reach a comment.
var callMarkers = []string{"<|", "<｜", "tool_call>", "<function", "</function>", "<parameter", "</parameter>",
	"<arg_key>", "<arg_value>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<invoke", "</invoke>", "minimax:tool_call", "</s>"}

// leaks reports whether a comment carries reasoning or call markup.
func leaks(comment string) bool {
	if strings.Contains(comment, "secret") {
		return true
	}
	for _, m := range callMarkers {
		if strings.Contains(comment, m) {
			return true
		}
	}
	return false
}

// client is a model provider on wire, talking to srv.
func client(t *testing.T, wire string, srv *llmtest.Server) llm.Client {
	t.Helper()
	var c llm.Client
	var err error
	if wire == llmtest.WireOpenAI {
		c, err = openai.New(openai.Options{BaseURL: srv.OpenAIURL(), Model: "test-model"})
	} else {
		c, err = ollama.New(ollama.Options{Endpoint: srv.URL(), Model: "test-model"})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s shape) wires() []string {
	if s.openaiOnly || s.raw != "" {
		return []string{llmtest.WireOpenAI}
	}
	return []string{llmtest.WireOpenAI, llmtest.WireOllama}
}

// modes are the settings of native tool calls the shape is run with: text
// reaches the decoder in either mode (local models write JSON and markup
// with native tools on), native calls only with them on.
func (s shape) modes() []bool {
	if len(s.reply.ToolCalls) > 0 || s.native && s.raw != "" {
		return []bool{true}
	}
	return []bool{s.native, !s.native}
}

// mode names a setting of native tool calls in a test's name.
func mode(native bool) string {
	if native {
		return "native"
	}
	return "json"
}

func (s shape) step() llmtest.Step {
	if s.raw != "" {
		return llmtest.Garbage{Body: s.raw}
	}
	return s.reply
}

// Each shape, as the server sends it on each wire, with native tool calls
// on and off (only on for native calls), decodes to the intended calls
// (with a hint when it was not written as asked) or to the reason sent
// back.
func TestRealModelReplyShapesDecode(t *testing.T) {
	host := startHost(t)
	for _, s := range shapes {
		for _, wire := range s.wires() {
			for _, native := range s.modes() {
				t.Run(s.name+"/"+wire+"/"+mode(native), func(t *testing.T) {
					srv := llmtest.NewServer(t, llmtest.Options{})
					srv.Script(s.step())
					resp, err := client(t, wire, srv).Chat(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "echo"}}})
					if err != nil {
						t.Fatal(err)
					}
					ts := engine.NewToolset(host.Tools(), nil, native)
					r, err := ts.DecodeResponse(resp)
					if s.correction != "" {
						reason := r.Problem
						if re, ok := err.(*engine.ReplyError); ok {
							reason = re.Reason
						} else if err != nil {
							t.Fatal(err)
						}
						if len(r.Calls) != 0 || !strings.Contains(reason, s.correction) {
							t.Fatalf("calls %v, reason %q; want no calls and %q (source: %s)", r.Calls, reason, s.correction, s.source)
						}
						return
					}
					if err != nil {
						t.Fatalf("%v (source: %s)", err, s.source)
					}
					if got := callKeys(r.Calls); strings.Join(got, "|") != strings.Join(s.calls, "|") {
						t.Fatalf("calls %q, want %q; problem %q (source: %s)", got, s.calls, r.Problem, s.source)
					}
					if (r.Hint != "") != s.hint || strings.Contains(r.Hint, "\n") {
						t.Errorf("hint %q, want one: %v", r.Hint, s.hint)
					}
					if (s.comment != "" || s.silent) && r.Comment != s.comment {
						t.Errorf("comment %q, want %q", r.Comment, s.comment)
					}
					if leaks(r.Comment) {
						t.Errorf("comment %q carries reasoning or call markup", r.Comment)
					}
				})
			}
		}
	}
}

func callKeys(calls []engine.ToolCall) []string {
	var out []string
	for _, c := range calls {
		var b bytes.Buffer
		if err := json.Compact(&b, c.Args); err != nil {
			b.Write(c.Args)
		}
		out = append(out, c.Tool+" "+b.String())
	}
	return out
}

// Each shape runs through the engine on both wires, in both loops and with
// native tool calls on and off (only on for native calls): the intended
// tool call runs (its result comes back to the model, with the hint after
// it), or the correction goes back and no tool runs; the reasoning never
// reaches a comment, a later request or the checkpoint.
func TestRealModelReplyShapesRun(t *testing.T) {
	host := startHost(t)
	for _, s := range shapes {
		for _, wire := range s.wires() {
			for _, loop := range []string{"plain", "planning"} {
				for _, native := range s.modes() {
					t.Run(s.name+"/"+wire+"/"+loop+"/"+mode(native), func(t *testing.T) {
						srv := llmtest.NewServer(t, llmtest.Options{})
						before, after := shapeScript(loop)
						for _, c := range before {
							srv.Script(llmtest.Reply{Content: c})
						}
						srv.Script(s.step())
						for _, c := range after {
							srv.Script(llmtest.Reply{Content: c})
						}
						w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
						out, err := shapeRun(t, loop, w, client(t, wire, srv), tools{Host: host}, native)
						if err != nil || out.End != engine.Done {
							t.Fatalf("outcome %+v, %v (source: %s)", out, err, s.source)
						}
						reqs := srv.Requests()
						next := reqs[len(before)+1].Messages // the request after the shape
						results, hinted, corrected := 0, false, false
						for _, m := range next[len(next)-len(s.calls)-2:] {
							results += strings.Count(m.Content, "tool output of test/")
							hinted = hinted || strings.Contains(m.Content, "Note: ")
							corrected = corrected || strings.Contains(m.Content, "could not be used")
						}
						if s.correction != "" {
							if !corrected || results != 0 {
								t.Errorf("correction %v, %d results; want the correction and no call (source: %s)", corrected, results, s.source)
							}
						} else if results != len(s.calls) || hinted != s.hint || corrected {
							t.Errorf("%d results, hint %v, corrected %v; want %d results, hint %v (source: %s)",
								results, hinted, corrected, len(s.calls), s.hint, s.source)
						}
						for _, r := range reqs {
							if strings.Contains(string(r.Body), "secret") || strings.Contains(string(r.Body), "Thinking and thinking") {
								t.Fatalf("request %d carries the reasoning", r.N)
							}
						}
						for _, c := range w.comments {
							if leaks(c) {
								t.Errorf("comment carries reasoning or call markup:\n%s", c)
							}
						}
						for _, cp := range w.cps {
							if strings.Contains(string(cp.Data), "secret") {
								t.Errorf("the checkpoint keeps the reasoning")
							}
						}
					})
				}
			}
		}
	}
}

// shapeScript is what the model says before and after the shape: in
// planning mode the plan of one action, then its end and the verification.
func shapeScript(loop string) (before, after []string) {
	if loop == "plain" {
		return nil, []string{`{"done": true, "comment": "Echoed."}`}
	}
	return []string{`{"phase": "planning", "goal_understanding": {"main_objective": "Echo", "success_criteria": ["echoed"]},
			"task_decomposition": {"subtasks": [{"id": "t1", "description": "echo"}]},
			"action_plan": {"actions": [{"id": "a1", "task_id": "t1", "description": "echo hi"}]}}`},
		[]string{`{"phase": "execution", "action_id": "a1", "status": "completed", "summary": "echoed"}`,
			`{"phase": "verification", "verification": {"passed": true, "criteria": [{"criterion": "echoed", "met": true}]}, "comment": "Echoed."}`}
}

// shapeRun runs the task on w in loop, with native tool calls or not.
func shapeRun(t *testing.T, loop string, w *world, m llm.Client, ts engine.Tools, native bool) (engine.Outcome, error) {
	t.Helper()
	return wireRun(t, loop, w, m, ts, engine.Options{FunctionCalling: native})
}

// scripted answers with replies in order, recording each request; the
// request numbered fail (from 1) fails as a process killed there would.
type scripted struct {
	replies []string
	fail    int
	reqs    [][]llm.Message
}

func (m *scripted) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	m.reqs = append(m.reqs, slices.Clone(req.Messages))
	n := len(m.reqs)
	if n == m.fail {
		return llm.Response{}, errKilled
	}
	if n > len(m.replies) {
		return llm.Response{}, fmt.Errorf("script exhausted after %d replies", len(m.replies))
	}
	return llm.Response{Message: llm.Message{Role: llm.Assistant, Content: m.replies[n-1]}}, nil
}

// notes counts the hints of each kind in a request's messages.
func notes(msgs []llm.Message) (text, name int) {
	for _, m := range msgs {
		text += strings.Count(m.Content, "Note: your last reply was read as a call")
		name += strings.Count(m.Content, "was taken to be")
	}
	return text, name
}

// A run tells the model once how to write a call: a second call written
// as text (another family's markup) gets no second hint, a hint of
// another kind (a loosely named tool) still comes once; and a run resumed
// after the first hint does not give it again.
func TestHintOncePerRun(t *testing.T) {
	host := startHost(t)
	calls := []string{
		`<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>`,
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>echo<｜tool▁sep｜>{\"text\": \"two\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		`{"comment": "Once more.", "command": {"tool": "echo", "args": {"text": "three"}}}`,
		qwenXML,
	}
	for _, loop := range []string{"plain", "planning"} {
		before, after := shapeScript(loop)
		replies := slices.Concat(before, calls, after)
		t.Run(loop, func(t *testing.T) {
			w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
			m := &scripted{replies: replies}
			if out, err := shapeRun(t, loop, w, m, tools{Host: host}, false); err != nil || out.End != engine.Done {
				t.Fatalf("outcome %+v, %v", out, err)
			}
			last := m.reqs[len(m.reqs)-1]
			if text, name := notes(last); text != 1 || name != 1 {
				t.Errorf("%d hints on calls written as text, %d on loose names; want one of each", text, name)
			}
		})
		t.Run(loop+"/resumed", func(t *testing.T) {
			w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
			fail := len(before) + 2 // the request after the first hint
			m := &scripted{replies: replies, fail: fail}
			if _, err := shapeRun(t, loop, w, m, tools{Host: host}, false); !errors.Is(err, errKilled) {
				t.Fatalf("first run: %v, want it killed", err)
			}
			if text, _ := notes(m.reqs[fail-1]); text != 1 {
				t.Fatalf("%d hints before the kill, want 1", text)
			}
			resumed := &scripted{replies: replies[fail-1:]}
			if out, err := shapeRun(t, loop, w, resumed, tools{Host: host}, false); err != nil || out.End != engine.Done {
				t.Fatalf("resumed outcome %+v, %v", out, err)
			}
			if text, _ := notes(resumed.reqs[len(resumed.reqs)-1]); text != 1 {
				t.Errorf("%d hints on calls written as text after the resume, want the one from before it", text)
			}
		})
	}
}

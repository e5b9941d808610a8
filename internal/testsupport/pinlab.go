package testsupport

// The labserver tool and prompt whose definitions LAB_DEFS drives.
const (
	PinnedTool   = "docs__pinned"
	PinnedPrompt = "docs__pinprompt"
)

// FirstDefs are the pinned tool and prompt definitions a pins lab starts with.
var FirstDefs = PinDefs{Description: "Search the docs.", ReadOnlyHint: true, PromptDesc: "Greets."}

// CompletePrompt is the params of a completion/complete of prompt's
// argument "who".
func CompletePrompt(prompt string) map[string]any {
	return map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": prompt}, "argument": map[string]any{"name": "who", "value": "a"}}
}

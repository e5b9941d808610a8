package wire

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// tasksLab is a labserver with tasks (LAB_TASKS) as "jobs".
func tasksLab(t *testing.T) *ts.Lab {
	lab := ts.NewLab(t, "", server(ts.Server{Alias: "jobs", Env: map[string]string{"LAB_TASKS": "1"}, Hide: labHidden}))
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	return lab
}

// taskScripts are task-augmented calls (2025-11-25 only: a 2026-07-28
// request runs as a plain call).
func taskScripts() []script {
	return []script{
		// A task through its life: created working, seen working by
		// tasks/get and tasks/list while the child's task waits, its end
		// told by notifications/tasks/status once the child's task is
		// released (by a file, so that no request is in flight when the
		// notification comes), its result; a second one cancelled, whose
		// status notification is sent as the answer to the cancel is, so
		// that the two come in either order; ids of tasks that do not exist.
		{name: "tasks", variants: legacyOnly, lab: tasksLab, run: func(w *W) {
			w.init()
			if w.hx != nil {
				w.openGet()
			}
			created := w.req("tools/call", callMembers("jobs__task_wait", `{"tag":"a"}`)+`,"task":{"ttl":60000}`)
			id := created.get("result.task.taskId")
			w.req("tasks/get", fmt.Sprintf(`"taskId":%q`, id))
			w.req("tasks/list", "")
			w.release("a")
			w.await("notifications/tasks/status")
			w.req("tasks/result", fmt.Sprintf(`"taskId":%q`, id))
			w.req("tasks/get", fmt.Sprintf(`"taskId":%q`, id))

			created = w.req("tools/call", callMembers("jobs__task_wait", `{"tag":"b"}`)+`,"task":{"ttl":60000}`)
			id = created.get("result.task.taskId")
			w.sendAnyOrder(w.line("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, id)), "notifications/tasks/status")
			w.req("tasks/get", fmt.Sprintf(`"taskId":%q`, id))
			w.req("tasks/result", fmt.Sprintf(`"taskId":%q`, id))
			// No tasks/list of both: it orders tasks by id, which is random.

			w.req("tasks/get", `"taskId":"no-such-task"`)
			w.req("tasks/cancel", `"taskId":"no-such-task"`)
			w.req("tasks/result", `"taskId":"no-such-task"`)
			// A tool that runs only as a task, called without one.
			w.call("jobs__task_wait", `{"tag":"c"}`)
		}},
		// What a 2026-07-28 client gets of the same.
		{name: "tasks_modern", variants: modernOnly, lab: tasksLab, run: func(w *W) {
			w.init()
			w.req("tools/call", callMembers("jobs__task_wait", `{"tag":"a"}`)+`,"task":{"ttl":60000}`)
			w.req("tasks/get", `"taskId":"no-such-task"`)
			w.req("tasks/list", "")
		}},
	}
}

// release lets the labserver's task_wait of tag answer, by the file it
// looks for.
func (w *W) release(tag string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.lab.Started, "release-"+tag), nil, 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.note("task_wait %s released", tag)
}

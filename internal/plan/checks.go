package plan

import (
	"context"
	"fmt"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/report"
)

// Reopen goes back to work when the repository's checks refused the done
// of a planned round: a new action ("checks-N", under the subtask of the
// plan's last action) asks for them to pass, in a new execution visit. Once
// it is done the plan is finished again and the round ends done without
// another verification round (the model's verification passed before): the
// checks, run again at that done, judge the fix.
func (p *policy) Reopen(ctx context.Context, failing []engine.CheckResult) error {
	st := p.st
	if st.Plan == nil || len(st.Plan.ActionPlan.Actions) == 0 {
		return fmt.Errorf("the checks refused a done with no plan")
	}
	cmds := make([]report.Command, 0, len(failing))
	for _, c := range failing {
		cmds = append(cmds, report.Command(c))
	}
	st.Fixes++
	id := fmt.Sprintf("checks-%d", st.Fixes)
	for n := 2; st.Plan.action(id) != nil; n++ {
		id = fmt.Sprintf("checks-%d-%d", st.Fixes, n)
	}
	actions := st.Plan.ActionPlan.Actions
	np := clonePlan(st.Plan)
	np.ActionPlan.Actions = append(np.ActionPlan.Actions, Action{ID: id, TaskID: actions[len(actions)-1].TaskID,
		Description: p.c.o.Lang.FixChecks(cmds), Status: Pending})
	st.Plan = np
	p.enter(At{Phase: PhaseExecution})
	p.log.Info("the checks refused the done; an action fixes them", "action", id, "failing", len(failing))
	p.progress(ctx, false)
	return nil
}

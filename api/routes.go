package api

import "net/http"

// route is one endpoint: its method, its path in ServeMux syntax (also the
// OpenAPI path: {name} is a path parameter), the scope it needs and its
// handler. routes is the one list both New and the OpenAPI test walk.
type route struct {
	method string
	path   string
	scope  Scope
	handle func(s *Server, w http.ResponseWriter, r *http.Request, p principal) error
}

const metricsPath = "/metrics"

func routes() []route {
	const (
		get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
	)
	return []route{
		{get, "/healthz", scopeNone, (*Server).healthz},
		{get, "/readyz", scopeNone, (*Server).readyz},
		{get, "/openapi.json", scopeNone, (*Server).openAPI},
		{get, metricsPath, ScopeRead, (*Server).metrics},

		{post, "/v1/jobs", ScopeAdmin, (*Server).enqueueJob},
		{post, "/v1/jobs/batch", ScopeAdmin, (*Server).enqueueJobs},
		{post, "/v1/outbox", ScopeAdmin, (*Server).sendMessage},
		{post, "/v1/outbox/batch", ScopeAdmin, (*Server).sendMessages},
		{post, "/v1/timers", ScopeAdmin, (*Server).scheduleTimer},
		{post, "/v1/timers/batch", ScopeAdmin, (*Server).scheduleTimers},
		{post, "/v1/inbox", ScopeAdmin, (*Server).receiveMessage},
		{post, "/v1/inbox/batch", ScopeAdmin, (*Server).receiveMessages},

		{get, "/v1/tables/{table}/items", ScopeRead, (*Server).listItems},
		{get, "/v1/tables/{table}/items/{id}", ScopeRead, (*Server).getItem},
		{post, "/v1/tables/{table}/items/retry", ScopeAdmin, (*Server).retryItems},
		{post, "/v1/tables/{table}/items/cancel", ScopeAdmin, (*Server).cancelItems},
		{post, "/v1/tables/{table}/items/delete", ScopeAdmin, (*Server).deleteItems},
		{post, "/v1/tables/{table}/items/retry-matching", ScopeAdmin, (*Server).retryMatching},
		{post, "/v1/tables/{table}/items/cancel-matching", ScopeAdmin, (*Server).cancelMatching},
		{post, "/v1/tables/{table}/items/delete-matching", ScopeAdmin, (*Server).deleteMatching},

		{get, "/v1/queues", ScopeRead, (*Server).listQueues},
		{post, "/v1/queues/{table}/{queue}/pause", ScopeAdmin, (*Server).pauseQueue},
		{post, "/v1/queues/{table}/{queue}/resume", ScopeAdmin, (*Server).resumeQueue},
		{put, "/v1/queues/{table}/{queue}/limit", ScopeAdmin, (*Server).setLimit},
		{del, "/v1/queues/{table}/{queue}/limit", ScopeAdmin, (*Server).removeLimit},
		{put, "/v1/queues/{table}/{queue}/fair", ScopeAdmin, (*Server).setFair},
		{post, "/v1/queues/{table}/{queue}/kinds/{kind}/pause", ScopeAdmin, (*Server).pauseKind},
		{post, "/v1/queues/{table}/{queue}/kinds/{kind}/resume", ScopeAdmin, (*Server).resumeKind},

		{get, "/v1/flow", ScopeRead, (*Server).flowStatus},
		{put, "/v1/flow/limits", ScopeAdmin, (*Server).setFlowLimit},
		{del, "/v1/flow/limits", ScopeAdmin, (*Server).removeFlowLimit},

		{get, "/v1/workflows", ScopeRead, (*Server).listWorkflows},
		{post, "/v1/workflows", ScopeAdmin, (*Server).createWorkflow},
		{get, "/v1/workflows/{id}", ScopeRead, (*Server).getWorkflow},
		{post, "/v1/workflows/{id}/tasks", ScopeAdmin, (*Server).addWorkflowTasks},
		{post, "/v1/workflows/{id}/cancel", ScopeAdmin, (*Server).cancelWorkflow},
		{post, "/v1/workflows/{id}/retry", ScopeAdmin, (*Server).retryWorkflow},

		{get, "/v1/schedules", ScopeRead, (*Server).listSchedules},
		{post, "/v1/schedules", ScopeAdmin, (*Server).createSchedule},
		{get, "/v1/schedules/{name}", ScopeRead, (*Server).getSchedule},
		{patch, "/v1/schedules/{name}", ScopeAdmin, (*Server).updateSchedule},
		{del, "/v1/schedules/{name}", ScopeAdmin, (*Server).deleteSchedule},
		{post, "/v1/schedules/{name}/trigger", ScopeAdmin, (*Server).triggerSchedule},
		{post, "/v1/schedules/{name}/enable", ScopeAdmin, (*Server).enableSchedule},
		{post, "/v1/schedules/{name}/disable", ScopeAdmin, (*Server).disableSchedule},
	}
}

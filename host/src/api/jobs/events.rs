//! `GET /jobs/{job_id}/events`: a job's executions as server-sent events, for `taskexec jobs
//! watch` and dashboards. Each event is `execution` with the execution as `GET /executions/{id}`
//! shows it, sent when it appears and whenever its status or attempt count changes; a one-shot
//! job's stream ends with an `end` event once its execution has finished. The server reads the
//! store every half second for the executions after the last one seen and for those not yet
//! finished, so a stream costs a couple of indexed queries per interval, however old the job.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};

use super::load;
use crate::api::error::ApiResult;
use crate::api::executions::ExecutionOut;
use crate::api::state::AppState;
use crate::domain::{ExecutionStatus, Scope, Trigger};
use crate::ids::{ExecutionId, JobId};
use crate::store::{Execution, PageKey, PageRequest};

const INTERVAL: Duration = Duration::from_millis(500);

/// What a stream has sent so far.
struct Follow {
    state: AppState,
    job_id: JobId,
    one_shot: bool,
    /// The newest execution seen: the next read starts after it.
    after: Option<PageKey>,
    /// Each execution sent, as it was sent.
    sent: HashMap<ExecutionId, (ExecutionStatus, i32)>,
    /// Events ready to go out, oldest first.
    queue: std::collections::VecDeque<Event>,
    first_read: bool,
    ended: bool,
}

impl Follow {
    /// Read what changed since the last read into the queue.
    async fn read(&mut self) {
        let store = &self.state.store;
        let mut changed: Vec<Execution> = Vec::new();
        loop {
            let page = PageRequest { after: self.after.clone(), limit: 200, ..Default::default() };
            let Ok(rows) = store.execution_list(&self.job_id, None, &page).await else { break };
            let full = rows.len() as i64 == page.limit;
            if let Some(last) = rows.last() {
                self.after = Some(PageKey { created_at: last.created_at, key: last.execution_id.to_string() });
            }
            changed.extend(rows);
            if !full {
                break;
            }
        }
        let unfinished: Vec<ExecutionId> = self
            .sent
            .iter()
            .filter(|(id, (status, _))| !status.is_finished() && !changed.iter().any(|e| &e.execution_id == *id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in unfinished {
            if let Ok(Some(execution)) = store.execution_get(&id).await {
                changed.push(execution);
            }
        }
        for execution in changed {
            let now = (execution.status, execution.attempt_count);
            if self.sent.get(&execution.execution_id) == Some(&now) {
                continue;
            }
            self.sent.insert(execution.execution_id.clone(), now);
            let done = self.one_shot && execution.status.is_finished();
            if let Ok(event) = Event::default().event("execution").json_data(ExecutionOut::from(execution)) {
                self.queue.push_back(event);
            }
            if done {
                self.queue.push_back(Event::default().event("end").data("the job's execution has finished"));
                self.ended = true;
            }
        }
    }
}

/// Follow a job's executions as server-sent events.
#[utoipa::path(get, path = "/jobs/{job_id}/events", tag = "jobs",
    params(("job_id" = String, Path, description = "The job's id (`job_…`).")),
    responses((status = 200, description = "`text/event-stream`: `execution` events (an execution as `GET /executions/{id}` shows it) as executions appear and change; for a one-shot job, a last `end` event once its execution has finished.", content_type = "text/event-stream", body = String)))]
pub async fn events(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let job = load(&state, &scope, &job_id).await?;
    let follow = Follow {
        state,
        job_id,
        one_shot: job.trigger_type != Trigger::Cron,
        after: None,
        sent: HashMap::new(),
        queue: Default::default(),
        first_read: true,
        ended: false,
    };
    let events = stream::unfold(follow, |mut follow| async move {
        loop {
            if let Some(event) = follow.queue.pop_front() {
                return Some((Ok(event), follow));
            }
            if follow.ended {
                return None;
            }
            if !follow.first_read {
                tokio::time::sleep(INTERVAL).await;
            }
            follow.first_read = false;
            follow.read().await;
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

//! `_native.ElectionHandle`, `LeadershipHandle`, `ObserverHandle`: the core's leader election,
//! each call blocking (GIL released, Ctrl-C honoured) or as an asyncio awaitable. The Python
//! side (`polylock._election`) wraps them.

use pyo3::prelude::*;

use crate::args::wait_arg;
use crate::asyncio::awaitable;
use crate::wait::wait_interruptibly;

/// A leader as Python receives it: (value, term, owner, client name).
type LeaderTuple = (String, i64, String, String);

fn leader_tuple(leader: Option<polylock::Leader>) -> Option<LeaderTuple> {
    leader.map(|leader| (leader.value, leader.term, leader.owner, leader.client_name))
}

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct ElectionHandle {
    election: polylock::Election,
}

impl ElectionHandle {
    pub(crate) fn new(election: polylock::Election) -> Self {
        ElectionHandle { election }
    }
}

#[pymethods]
impl ElectionHandle {
    #[getter]
    fn name(&self) -> &str {
        self.election.name()
    }

    /// Blocks until this candidate leads (`None` when `timeout` seconds ran out).
    #[pyo3(signature = (value, timeout = None))]
    fn campaign(
        &self,
        py: Python<'_>,
        value: &str,
        timeout: Option<f64>,
    ) -> PyResult<Option<LeadershipHandle>> {
        let wait = wait_arg(py, timeout)?;
        let won = wait_interruptibly(py, self.election.campaign(value, wait))?;
        Ok(won.map(|leadership| LeadershipHandle { leadership }))
    }

    #[pyo3(signature = (value, timeout = None))]
    fn campaign_async<'py>(
        &self,
        py: Python<'py>,
        value: String,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let wait = wait_arg(py, timeout)?;
        let election = self.election.clone();
        awaitable(py, async move {
            let won = election.campaign(&value, wait).await?;
            Ok(won.map(|leadership| LeadershipHandle { leadership }))
        })
    }

    fn leader(&self, py: Python<'_>) -> PyResult<Option<LeaderTuple>> {
        wait_interruptibly(py, self.election.leader()).map(leader_tuple)
    }

    fn leader_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let election = self.election.clone();
        awaitable(py, async move { election.leader().await.map(leader_tuple) })
    }

    fn observe(&self, py: Python<'_>) -> PyResult<ObserverHandle> {
        let observer = wait_interruptibly(py, self.election.observe())?;
        Ok(ObserverHandle { observer })
    }

    fn observe_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let election = self.election.clone();
        awaitable(py, async move {
            let observer = election.observe().await?;
            Ok(ObserverHandle { observer })
        })
    }
}

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct LeadershipHandle {
    leadership: polylock::Leadership,
}

#[pymethods]
impl LeadershipHandle {
    #[getter]
    fn term(&self) -> i64 {
        self.leadership.term()
    }

    #[getter]
    fn value(&self) -> String {
        self.leadership.value()
    }

    #[getter]
    fn owner(&self) -> &str {
        self.leadership.owner()
    }

    fn is_leader(&self) -> bool {
        self.leadership.is_leader()
    }

    fn is_lost(&self) -> bool {
        self.leadership.is_lost()
    }

    fn proclaim(&self, py: Python<'_>, value: &str) -> PyResult<()> {
        wait_interruptibly(py, self.leadership.proclaim(value))
    }

    fn proclaim_async<'py>(&self, py: Python<'py>, value: String) -> PyResult<Bound<'py, PyAny>> {
        let leadership = self.leadership.clone();
        awaitable(py, async move { leadership.proclaim(&value).await })
    }

    fn resign(&self, py: Python<'_>) -> PyResult<()> {
        wait_interruptibly(py, self.leadership.resign())
    }

    fn resign_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let leadership = self.leadership.clone();
        awaitable(py, async move { leadership.resign().await })
    }

    /// Blocks until the leadership ends (lost or resigned); False when `timeout` ran out.
    #[pyo3(signature = (timeout = None))]
    fn wait_lost(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let wait = wait_arg(py, timeout)?;
        wait_interruptibly(py, self.leadership.wait_lost(wait))
    }

    fn wait_lost_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let leadership = self.leadership.clone();
        awaitable(py, async move { leadership.wait_lost(None).await })
    }
}

#[pyclass(frozen, module = "polylock._native")]
pub(crate) struct ObserverHandle {
    observer: polylock::Observer,
}

#[pymethods]
impl ObserverHandle {
    /// Blocks until the next change (the leader now on the first call): `(True, leader or
    /// None)`, or `(False, None)` when `timeout` seconds ran out.
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<(bool, Option<LeaderTuple>)> {
        match wait_arg(py, timeout)? {
            None => {
                let leader = wait_interruptibly(py, self.observer.next())?;
                Ok((true, leader_tuple(leader)))
            }
            Some(wait) => match wait_interruptibly(py, self.observer.next_within(wait))? {
                Some(leader) => Ok((true, leader_tuple(leader))),
                None => Ok((false, None)),
            },
        }
    }

    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let observer = self.observer.clone();
        awaitable(py, async move { observer.next().await.map(leader_tuple) })
    }
}

//! Budgets: how much a run may spend on the model, and the one place that decides
//! when it has spent it.
//!
//! A [`Budget`] caps a run's model `tokens` (prompt plus completion, summed over
//! requests), its model `requests`, and its `wall` time (from the run's start). It is
//! set by a blueprint's `budget:` or by `[budget]` in the config; every field is
//! optional and an unset one is unlimited.
//!
//! A [`BudgetMeter`] counts against one budget. Both paths that call a model use it
//! the same way: the in-process agent loop ([`Agent`](crate::agent::Agent)) and the
//! orchestrator's model gateway, which serves the agents inside sandboxes. Before a
//! model request, [`BudgetMeter::admit`]; after it, [`BudgetMeter::charge`] with the
//! provider's own usage report. The first time either refuses, the run is over
//! budget for good; [`BudgetMeter::report`] emits its one `budget_exceeded` event.
//!
//! ```
//! use boitata_core::budget::{Budget, BudgetMeter};
//!
//! let meter = BudgetMeter::new(Budget { tokens: Some(100), ..Budget::default() });
//! meter.admit().unwrap();
//! let over = meter.charge(80, 30).unwrap_err();
//! assert_eq!(over.to_string(), "budget exceeded: tokens 110 > 100");
//! assert!(meter.admit().is_err(), "no further request is admitted");
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use std::time::Instant;

use crate::event::{Emitter, EventPayload, SinkError};

/// What a run may spend. Every field unset (the default) means no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budget {
    /// The most model tokens (prompt plus completion, over every request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// The most model requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// The most wall-clock time from the run's start (humantime: `30m`, `2h`); no
    /// model request is admitted after it.
    #[serde(skip_serializing_if = "Option::is_none", with = "optional_duration")]
    pub wall: Option<Duration>,
}

impl Budget {
    /// True when no field is set.
    pub fn is_unlimited(&self) -> bool {
        self.tokens.is_none() && self.requests.is_none() && self.wall.is_none()
    }
}

pub use boitata_protocol::event::BudgetKind;

/// A budget was spent: which one, how much was used and what the limit was (tokens,
/// requests, or seconds for `wall`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("budget exceeded: {budget} {used}{unit} > {limit}{unit}", unit = self.unit())]
pub struct BudgetExceeded {
    /// The limit spent.
    pub budget: BudgetKind,
    /// What was used: tokens, requests, or whole seconds of wall time.
    pub used: u64,
    /// The limit, in the same unit.
    pub limit: u64,
}

impl BudgetExceeded {
    fn unit(&self) -> &'static str {
        match self.budget {
            BudgetKind::Wall => "s",
            BudgetKind::Tokens | BudgetKind::Requests => "",
        }
    }

    /// The `budget_exceeded` event's payload.
    pub fn event(&self) -> EventPayload {
        EventPayload::BudgetExceeded {
            budget: self.budget,
            used: self.used,
            limit: self.limit,
            message: self.to_string(),
        }
    }
}

/// Counts a run's model use against its [`Budget`]. Cheap to clone: clones share one
/// count, so every node and the gateway of a run charge the same meter.
#[derive(Debug, Clone)]
pub struct BudgetMeter {
    budget: Budget,
    started: Instant,
    state: Arc<Mutex<MeterState>>,
}

#[derive(Debug, Default)]
struct MeterState {
    tokens: u64,
    requests: u64,
    /// The first limit spent: once set, nothing more is admitted.
    exceeded: Option<BudgetExceeded>,
    /// Whether its `budget_exceeded` event was emitted.
    reported: bool,
}

impl Default for BudgetMeter {
    fn default() -> Self {
        BudgetMeter::new(Budget::default())
    }
}

impl BudgetMeter {
    /// A meter for `budget`, its wall clock starting now.
    pub fn new(budget: Budget) -> Self {
        BudgetMeter {
            budget,
            started: Instant::now(),
            state: Arc::new(Mutex::new(MeterState::default())),
        }
    }

    /// The budget counted against.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// When the wall budget runs out, if there is one.
    pub fn wall_deadline(&self) -> Option<Instant> {
        self.budget.wall.map(|wall| self.started + wall)
    }

    /// Checks, without counting a request, that no limit is spent and the wall time
    /// is not up (for a timer that stops a run at its wall budget).
    ///
    /// # Errors
    /// [`BudgetExceeded`] as [`BudgetMeter::admit`] says, the request count aside.
    pub fn check(&self) -> Result<(), BudgetExceeded> {
        let mut state = self.lock();
        self.check_locked(&mut state)
    }

    fn check_locked(&self, state: &mut MeterState) -> Result<(), BudgetExceeded> {
        if let Some(exceeded) = state.exceeded {
            return Err(exceeded);
        }
        if let Some(wall) = self.budget.wall {
            let elapsed = self.started.elapsed();
            if elapsed > wall {
                return Err(*state.exceeded.insert(BudgetExceeded {
                    budget: BudgetKind::Wall,
                    used: elapsed.as_secs(),
                    limit: wall.as_secs(),
                }));
            }
        }
        Ok(())
    }

    /// Admits one more model request and counts it.
    ///
    /// # Errors
    /// [`BudgetExceeded`] when a limit is already spent, the wall time is up, or this
    /// request would be one more than `requests` allows (then it is not counted).
    pub fn admit(&self) -> Result<(), BudgetExceeded> {
        let mut state = self.lock();
        self.check_locked(&mut state)?;
        if let Some(limit) = self.budget.requests {
            if state.requests >= limit {
                let used = state.requests + 1;
                return Err(*state.exceeded.insert(BudgetExceeded {
                    budget: BudgetKind::Requests,
                    used,
                    limit,
                }));
            }
        }
        state.requests += 1;
        Ok(())
    }

    /// Charges the tokens of one answered request, as the provider reported them.
    ///
    /// # Errors
    /// [`BudgetExceeded`] when the total goes over `tokens` (the first time, and for
    /// every charge after a limit was spent).
    pub fn charge(&self, input_tokens: u64, output_tokens: u64) -> Result<(), BudgetExceeded> {
        let mut state = self.lock();
        state.tokens = state
            .tokens
            .saturating_add(input_tokens)
            .saturating_add(output_tokens);
        if let Some(exceeded) = state.exceeded {
            return Err(exceeded);
        }
        match self.budget.tokens {
            Some(limit) if state.tokens > limit => {
                let used = state.tokens;
                Err(*state.exceeded.insert(BudgetExceeded {
                    budget: BudgetKind::Tokens,
                    used,
                    limit,
                }))
            }
            _ => Ok(()),
        }
    }

    /// The limit spent, if one was.
    pub fn exceeded(&self) -> Option<BudgetExceeded> {
        self.lock().exceeded
    }

    /// Tokens charged so far.
    pub fn tokens_used(&self) -> u64 {
        self.lock().tokens
    }

    /// Requests admitted so far.
    pub fn requests_used(&self) -> u64 {
        self.lock().requests
    }

    /// Emits the run's one `budget_exceeded` event, tagged with `node`, if a limit is
    /// spent and no clone of this meter has emitted it yet.
    ///
    /// # Errors
    /// [`SinkError`] when the event cannot be recorded.
    pub fn report(&self, emitter: &Emitter, node: Option<&str>) -> Result<(), SinkError> {
        let exceeded = {
            let mut state = self.lock();
            match state.exceeded {
                Some(exceeded) if !state.reported => {
                    state.reported = true;
                    exceeded
                }
                _ => return Ok(()),
            }
        };
        emitter.emit(node, exceeded.event()).map(drop)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MeterState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Serde for `Option<Duration>` as an optional humantime string.
mod optional_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    use crate::config::humantime_serde_compat;

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => humantime_serde_compat::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        struct Wrapped(#[serde(with = "humantime_serde_compat")] Duration);
        Option::<Wrapped>::deserialize(d).map(|w| w.map(|Wrapped(d)| d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_over_the_limit_are_refused_with_the_message_and_stick() {
        let meter = BudgetMeter::new(Budget {
            tokens: Some(120_000),
            ..Budget::default()
        });
        meter.admit().unwrap();
        meter.charge(100_000, 20_000).unwrap();
        meter.admit().unwrap();
        let over = meter.charge(30, 4).unwrap_err();
        assert_eq!(over.to_string(), "budget exceeded: tokens 120034 > 120000");
        assert_eq!(meter.admit().unwrap_err(), over);
        assert_eq!(meter.exceeded(), Some(over));
    }

    #[test]
    fn requests_beyond_the_limit_are_not_admitted() {
        let meter = BudgetMeter::new(Budget {
            requests: Some(2),
            ..Budget::default()
        });
        meter.admit().unwrap();
        meter.admit().unwrap();
        let over = meter.admit().unwrap_err();
        assert_eq!(over.to_string(), "budget exceeded: requests 3 > 2");
        assert_eq!(meter.requests_used(), 2);
    }

    #[test]
    fn wall_time_is_counted_from_the_start() {
        let meter = BudgetMeter::new(Budget {
            wall: Some(Duration::from_millis(30)),
            ..Budget::default()
        });
        meter.admit().unwrap();
        std::thread::sleep(Duration::from_millis(40));
        let over = meter.admit().unwrap_err();
        assert_eq!(over.budget, BudgetKind::Wall);
        assert!(
            over.to_string().starts_with("budget exceeded: wall "),
            "{over}"
        );
    }

    #[test]
    fn no_budget_never_refuses() {
        let meter = BudgetMeter::default();
        for _ in 0..100 {
            meter.admit().unwrap();
            meter.charge(u64::MAX / 2, u64::MAX / 2).unwrap();
        }
    }

    #[test]
    fn the_event_is_reported_once_per_run() {
        use crate::event::EventSink;
        struct Count(Mutex<Vec<crate::Event>>);
        impl EventSink for Count {
            fn accept(&self, event: &crate::Event) -> Result<(), SinkError> {
                self.0.lock().unwrap().push(event.clone());
                Ok(())
            }
        }
        let sink = Arc::new(Count(Mutex::new(Vec::new())));
        let emitter = Emitter::new("r", Some(sink.clone()), crate::Redactor::default());
        let meter = BudgetMeter::new(Budget {
            requests: Some(0),
            ..Budget::default()
        });
        meter.report(&emitter, None).unwrap();
        assert!(sink.0.lock().unwrap().is_empty(), "nothing spent yet");
        assert!(meter.admit().is_err());
        let clone = meter.clone();
        clone.report(&emitter, Some("work")).unwrap();
        meter.report(&emitter, Some("work")).unwrap();
        assert_eq!(clone.exceeded(), meter.exceeded());
        let events = sink.0.lock().unwrap().clone();
        assert_eq!(events.len(), 1);
        let line = events[0].to_json_line();
        assert!(
            line.contains(r#""type":"budget_exceeded","budget":"requests","used":1,"limit":0"#),
            "{line}"
        );
    }

    #[test]
    fn budgets_parse_with_humantime_and_refuse_unknown_fields() {
        let budget: Budget = toml::from_str("tokens = 5\nwall = \"10m\"").unwrap();
        assert_eq!(budget.tokens, Some(5));
        assert_eq!(budget.wall, Some(Duration::from_secs(600)));
        assert!(budget.requests.is_none());
        assert!(toml::from_str::<Budget>("token = 5").is_err());
        let text = toml::to_string(&budget).unwrap();
        assert_eq!(toml::from_str::<Budget>(&text).unwrap(), budget);
    }
}

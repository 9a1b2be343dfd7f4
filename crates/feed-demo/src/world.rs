//! The simulated marketplace: creators, their posts, who follows whom, and how often each
//! user opens the app. Everything is drawn from ChaCha8 streams keyed by (seed, purpose,
//! user or creator, day), so a run depends only on its flags, not on thread timing.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

/// Days of posts that exist before the first simulated day (the catalogue at launch).
pub const HISTORY_DAYS: i64 = 14;

/// Purposes of the random streams, so two uses never share one.
#[derive(Clone, Copy)]
pub enum Stream {
    World = 1,
    Follows = 2,
    Posts = 3,
    UserDay = 4,
}

/// A random stream for (seed, purpose, key, day): SplitMix64 over the four, so nearby keys
/// give unrelated seeds.
pub fn rng(seed: u64, stream: Stream, key: u64, day: i64) -> ChaCha8Rng {
    let mut x = seed;
    for v in [stream as u64, key, day as u64] {
        x = splitmix(x ^ splitmix(v));
    }
    ChaCha8Rng::seed_from_u64(x)
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub struct Creator {
    /// Relative popularity (Zipf-like over the creators' ranks): who gets followed.
    pub weight: f64,
    /// Mean posts per simulated day.
    pub posts_per_day: f64,
}

pub struct World {
    pub seed: u64,
    pub creators: Vec<Creator>,
    cumulative: Vec<f64>,
    /// Chance that a user opens the app on a given day, per user (index user - 1).
    pub activity: Vec<f64>,
    /// First post id of each day, from day -HISTORY_DAYS; the last entry is the next id.
    pub day_first_post: Vec<i64>,
}

impl World {
    pub fn new(seed: u64, users: u64, creators: u64) -> World {
        let mut r = rng(seed, Stream::World, 0, 0);
        let creators: Vec<Creator> = (1..=creators)
            .map(|rank| Creator {
                weight: 1.0 / (rank as f64).powf(0.8),
                posts_per_day: r.random_range(0.3..1.5),
            })
            .collect();
        let mut cumulative = Vec::with_capacity(creators.len());
        let mut total = 0.0;
        for c in &creators {
            total += c.weight;
            cumulative.push(total);
        }
        let activity = (0..users).map(|_| r.random_range(0.35..0.95)).collect();
        World {
            seed,
            creators,
            cumulative,
            activity,
            day_first_post: vec![1],
        }
    }

    /// A creator id (1-based) drawn by popularity.
    fn popular_creator(&self, r: &mut ChaCha8Rng) -> i64 {
        let x = r.random_range(0.0..*self.cumulative.last().unwrap());
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1) as i64
            + 1
    }

    /// Whom `user` follows: 5 to 30 distinct creators, popular ones more often.
    pub fn follows(&self, user: u64) -> Vec<i64> {
        let mut r = rng(self.seed, Stream::Follows, user, 0);
        let want = r.random_range(5..=30).min(self.creators.len());
        let mut out: Vec<i64> = Vec::with_capacity(want);
        while out.len() < want {
            let c = self.popular_creator(&mut r);
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// The posts of `day` as (id, creator); ids continue from the previous day. Days must be
    /// added in order, from -HISTORY_DAYS.
    pub fn new_posts(&mut self, day: i64) -> Vec<(i64, i64)> {
        assert_eq!(self.day_first_post.len() as i64 - 1, day + HISTORY_DAYS);
        let mut r = rng(self.seed, Stream::Posts, 0, day);
        let mut next = *self.day_first_post.last().unwrap();
        let mut posts = Vec::new();
        for (i, c) in self.creators.iter().enumerate() {
            let whole = c.posts_per_day.floor() as u32;
            let n = whole + u32::from(r.random_bool(c.posts_per_day - whole as f64));
            for _ in 0..n {
                posts.push((next, i as i64 + 1));
                next += 1;
            }
        }
        self.day_first_post.push(next);
        posts
    }

    /// Post ids created from day `from` (clamped to the history) up to the latest day added.
    pub fn posts_since(&self, from: i64) -> std::ops::Range<i64> {
        let i = (from + HISTORY_DAYS).clamp(0, self.day_first_post.len() as i64 - 1) as usize;
        self.day_first_post[i]..*self.day_first_post.last().unwrap()
    }
}

/// One user's plan for one day: how many feed pages they scroll, and the stream that decides
/// what they do on each page.
pub struct UserDay {
    pub user: u64,
    pub pages: u32,
    pub rng: ChaCha8Rng,
}

pub fn user_day(world: &World, user: u64, day: i64) -> Option<UserDay> {
    let mut r = rng(world.seed, Stream::UserDay, user, day);
    if !r.random_bool(world.activity[(user - 1) as usize]) {
        return None;
    }
    // One to three sessions of one to three pages each.
    let sessions = r.random_range(1..=3u32);
    let pages = (0..sessions).map(|_| r.random_range(1..=3u32)).sum();
    Some(UserDay {
        user,
        pages,
        rng: r,
    })
}

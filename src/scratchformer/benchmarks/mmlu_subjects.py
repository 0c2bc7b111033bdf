"""MMLU's 57 subjects in the four groups lm-evaluation-harness 0.4.13 reports (``mmlu_stem``, ``mmlu_other``,
``mmlu_social_sciences``, ``mmlu_humanities``; each subject's task is tagged with its group in
``lm_eval/tasks/mmlu/default/``), and the description each subject's prompt starts with."""

from __future__ import annotations

__all__ = ["GROUPS", "SUBJECTS", "description"]

GROUPS: dict[str, tuple[str, ...]] = {
    "stem": (
        "abstract_algebra", "anatomy", "astronomy", "college_biology", "college_chemistry", "college_computer_science",
        "college_mathematics", "college_physics", "computer_security", "conceptual_physics", "electrical_engineering",
        "elementary_mathematics", "high_school_biology", "high_school_chemistry", "high_school_computer_science",
        "high_school_mathematics", "high_school_physics", "high_school_statistics", "machine_learning"),
    "other": (
        "business_ethics", "clinical_knowledge", "college_medicine", "global_facts", "human_aging", "management",
        "marketing", "medical_genetics", "miscellaneous", "nutrition", "professional_accounting",
        "professional_medicine", "virology"),
    "social_sciences": (
        "econometrics", "high_school_geography", "high_school_government_and_politics", "high_school_macroeconomics",
        "high_school_microeconomics", "high_school_psychology", "human_sexuality", "professional_psychology",
        "public_relations", "security_studies", "sociology", "us_foreign_policy"),
    "humanities": (
        "formal_logic", "high_school_european_history", "high_school_us_history", "high_school_world_history",
        "international_law", "jurisprudence", "logical_fallacies", "moral_disputes", "moral_scenarios", "philosophy",
        "prehistory", "professional_law", "world_religions"),
}
SUBJECTS: tuple[str, ...] = tuple(sorted(s for group in GROUPS.values() for s in group))


def description(subject: str) -> str:
    """The line each of a subject's prompts starts with (the harness's ``description``, its own words)."""
    return f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')}.\n\n"
